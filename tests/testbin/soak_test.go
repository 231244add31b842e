package testbin

import (
	"testing"
	"time"
)

func TestSoakScale(t *testing.T) {
	t.Setenv(SoakScaleEnv, "")
	if got := Soaked(2 * time.Second); got != 2*time.Second {
		t.Errorf("unset: Soaked(2s) = %v", got)
	}
	t.Setenv(SoakScaleEnv, "5")
	if got := Soaked(2 * time.Second); got != 10*time.Second {
		t.Errorf("5: Soaked(2s) = %v", got)
	}
	for _, bad := range []string{"0", "-1", "x", "1.5"} {
		t.Setenv(SoakScaleEnv, bad)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%q: no panic", bad)
				}
			}()
			SoakScale()
		}()
	}
}
