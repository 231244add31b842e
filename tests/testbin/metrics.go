package testbin

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Goroutines reads the go_goroutines sample out of a Prometheus text
// exposition (a /metrics answer of our binaries or of k8s.io/apiserver),
// so fault tests can check that a process's goroutines come back down.
func Goroutines(metrics io.Reader) (int, error) {
	sc := bufio.NewScanner(metrics)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("go_goroutines %q: %w", v, err)
			}
			return int(n), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading metrics: %w", err)
	}
	return 0, fmt.Errorf("no go_goroutines sample in the metrics")
}
