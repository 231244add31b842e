package testbin

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// SoakScaleEnv makes the fault suites' load longer or larger for a soak
// run (//tools/soak): a whole number of times, 1 when unset.
const SoakScaleEnv = "SANDBOX_SOAK_SCALE"

// SoakScale is SoakScaleEnv's value. Unset it is 1, so a default test run
// is never lengthened; a value that is not a positive whole number is a
// mistake in the run's setup and panics, naming the variable.
func SoakScale() int {
	v := os.Getenv(SoakScaleEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		panic(fmt.Sprintf("%s=%q: want a whole number of at least 1", SoakScaleEnv, v))
	}
	return n
}

// Soaked is d times SoakScale: how long a fault suite loads a system
// around a fault.
func Soaked(d time.Duration) time.Duration { return d * time.Duration(SoakScale()) }
