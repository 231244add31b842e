package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// AttemptLabel is the claim label naming one claim attempt. A node that
// did not answer a claim in time may still grant it later (a hung node
// runs again); the fleet then releases what carries that attempt's label,
// and only that: a claim reference is reused by a retry of the same
// create, which must not be released with the orphan.
const AttemptLabel = "fleet.attempt"

// attemptBytes of randomness name an attempt.
const attemptBytes = 10

// ValidateMetadata checks a front's claim labels against sandboxd's bounds
// with room for the label the fleet adds to every claim.
func ValidateMetadata(m map[string]string) error {
	if _, ok := m[AttemptLabel]; ok {
		return fmt.Errorf("metadata: %q is the fleet's own label", AttemptLabel)
	}
	return sandboxd.ValidateMetadata(withAttempt(m, hex.EncodeToString(make([]byte, attemptBytes))))
}

// newAttempt is a fresh attempt name.
func newAttempt() string {
	b := make([]byte, attemptBytes)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withAttempt is m plus the attempt label, as a new map.
func withAttempt(m map[string]string, attempt string) map[string]string {
	out := make(map[string]string, len(m)+1)
	maps.Copy(out, m)
	out[AttemptLabel] = attempt
	return out
}
