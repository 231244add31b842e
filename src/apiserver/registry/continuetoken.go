package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// continueVersion is the format of the continue tokens this server writes.
// A token of another format is refused, so a change of format cannot be
// misread as a position.
const continueVersion = 1

// maxContinueLen bounds a token before it is decoded: a namespace and a
// name are at most 63 and 253 bytes, so a real token is far shorter.
const maxContinueLen = 1024

// continueToken is where a paged list resumes. It is opaque to clients
// (base64 of JSON, as the Kubernetes storage's own tokens are) and carries
// no secret: only the last sandbox a page returned, which the client was
// shown, and the revision of the first page.
type continueToken struct {
	Version int `json:"v"`
	// Revision is the first page's revision: every page of one list
	// reports it, so a watch from it replays whatever changed while the
	// client paged.
	Revision  Revision `json:"rv"`
	Namespace string   `json:"ns"`
	Name      string   `json:"name"`
}

func encodeContinue(rev Revision, after sandbox.ClaimRef) string {
	b, err := json.Marshal(continueToken{Version: continueVersion, Revision: rev, Namespace: after.Namespace, Name: after.Name})
	if err != nil {
		panic(fmt.Sprintf("encoding a continue token: %v", err)) // plain strings and a number cannot fail
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeContinue reads a token; anything this server did not write is a
// 400, as the Kubernetes storage answers an invalid continue.
func decodeContinue(s string) (continueToken, error) {
	invalid := func(why string) (continueToken, error) {
		return continueToken{}, errors.NewBadRequest("continue key is not valid: " + why)
	}
	if len(s) > maxContinueLen {
		return invalid("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return invalid("not base64")
	}
	var t continueToken
	if err := json.Unmarshal(b, &t); err != nil {
		return invalid("not a continue token of this server")
	}
	if t.Version != continueVersion {
		return invalid(fmt.Sprintf("format %d is not %d", t.Version, continueVersion))
	}
	if len(validation.IsDNS1123Label(t.Namespace)) > 0 || len(validation.IsDNS1123Subdomain(t.Name)) > 0 {
		return invalid("it names no sandbox")
	}
	return t, nil
}
