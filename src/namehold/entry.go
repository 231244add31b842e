package namehold

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// entry is one hold as a shard's ConfigMap stores it, under dataKey of its
// name.
type entry struct {
	// Name is the held "<namespace>/<name>", for the reader of the object.
	Name string `json:"name"`
	// Holder is the replica that holds it.
	Holder string `json:"holder"`
	// Expires is when the hold lapses unless renewed.
	Expires time.Time `json:"expires"`
}

// dataKey is key's ConfigMap data key: namespace/name pairs can be longer
// than a data key may be (253 characters) and hold a slash, which a data key
// may not, so the key is a digest. 128 bits make a collision, which would
// only refuse a create, beyond reach.
func dataKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// shardOf is the shard index of key.
func shardOf(key string) int {
	sum := sha256.Sum256([]byte(key))
	return int(sum[16]) % Shards
}

func (e entry) encode() (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("encoding the hold on %q: %w", e.Name, err)
	}
	return string(b), nil
}

// decodeEntry reads a stored hold. A value that does not parse is treated
// as expired, so a damaged entry can never block a name for good.
func decodeEntry(s string) (entry, bool) {
	var e entry
	if err := json.Unmarshal([]byte(s), &e); err != nil || e.Holder == "" {
		return entry{}, false
	}
	return e, true
}
