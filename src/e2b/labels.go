package e2b

import (
	"fmt"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// What a create records beyond the claim itself (the caller's metadata,
// the alias it named, its internet choice, auto-pause, an anonymous
// caller's source address) rides on the sandbox's sandboxd claim as
// metadata labels: fixed at claim time, kept by the node for the claim's
// life, listed with it. Every replica reads them back off the node, so
// they survive the loss or restart of the replica that took the create,
// and nothing is written to the apiserver or anywhere else per sandbox.
const (
	labelAlias     = "e2b.alias"
	labelInternet  = "e2b.internet"
	labelAutoPause = "e2b.autopause"
	labelSource    = "e2b.source"
	// userLabelPrefix starts each of the caller's own metadata keys, so
	// a caller cannot set the surface's labels.
	userLabelPrefix = "u."
)

// labelsOf encodes what a create records as claim labels. The error is the
// caller's 400: sandboxd's bounds on labels (16 pairs, key and value
// sizes, 4 KiB as JSON) apply to the caller's metadata, the surface's
// labels and the fleet's attempt label together.
func labelsOf(rec record) (map[string]string, error) {
	out := make(map[string]string, len(rec.metadata)+4)
	for k, v := range rec.metadata {
		out[userLabelPrefix+k] = v
	}
	if rec.alias != "" {
		out[labelAlias] = rec.alias
	}
	if rec.internet != nil {
		out[labelInternet] = fmt.Sprint(*rec.internet)
	}
	if rec.autoPause {
		out[labelAutoPause] = "true"
	}
	if rec.autoResume {
		out[sandbox.LabelAutoResume] = "true"
	}
	if rec.source != "" {
		out[labelSource] = rec.source
	}
	if err := fleet.ValidateMetadata(out); err != nil {
		return nil, fmt.Errorf("metadata: %w (sandboxd keeps it with the sandbox; this surface adds up to 4 labels of its own and prefixes each key with %q, and the fleet one)", err, userLabelPrefix)
	}
	return out, nil
}

// recordFrom decodes a sandbox's claim labels; labels the surface did not
// write (a kubectl create, another client's) are ignored.
func recordFrom(namespace string, labels map[string]string) record {
	rec := record{namespace: namespace, metadata: map[string]string{}}
	for k, v := range labels {
		switch {
		case strings.HasPrefix(k, userLabelPrefix):
			rec.metadata[k[len(userLabelPrefix):]] = v
		case k == labelAlias:
			rec.alias = v
		case k == labelInternet && (v == "true" || v == "false"):
			b := v == "true"
			rec.internet = &b
		case k == labelAutoPause:
			rec.autoPause = v == "true"
		case k == sandbox.LabelAutoResume:
			rec.autoResume = v == "true"
		case k == labelSource:
			rec.source = v
		}
	}
	if len(rec.metadata) == 0 {
		rec.metadata = nil
	}
	return rec
}
