package records

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

// Labels encodes what a create records as claim labels. The error is the
// caller's 400: sandboxd's bounds on labels (16 pairs, key and value
// sizes, 4 KiB as JSON) apply to the caller's metadata, the surface's
// labels and the fleet's attempt label together.
func Labels(rec Record) (map[string]string, error) {
	out := make(map[string]string, len(rec.Metadata)+4)
	for k, v := range rec.Metadata {
		out[userLabelPrefix+k] = v
	}
	if rec.Alias != "" {
		out[labelAlias] = rec.Alias
	}
	if rec.Internet != nil {
		out[labelInternet] = fmt.Sprint(*rec.Internet)
	}
	if rec.AutoPause {
		out[labelAutoPause] = "true"
	}
	if rec.AutoResume {
		out[sandbox.LabelAutoResume] = "true"
	}
	if rec.Source != "" {
		out[labelSource] = rec.Source
	}
	if err := fleet.ValidateMetadata(out); err != nil {
		return nil, fmt.Errorf("metadata: %w (sandboxd keeps it with the sandbox; this surface adds up to 4 labels of its own and prefixes each key with %q, and the fleet one)", err, userLabelPrefix)
	}
	return out, nil
}

// FromLabels decodes a sandbox's claim labels; labels the surface did not
// write (a kubectl create, another client's) are ignored.
func FromLabels(namespace string, labels map[string]string) Record {
	rec := Record{Namespace: namespace, Metadata: map[string]string{}}
	for k, v := range labels {
		switch {
		case strings.HasPrefix(k, userLabelPrefix):
			rec.Metadata[k[len(userLabelPrefix):]] = v
		case k == labelAlias:
			rec.Alias = v
		case k == labelInternet && (v == "true" || v == "false"):
			b := v == "true"
			rec.Internet = &b
		case k == labelAutoPause:
			rec.AutoPause = v == "true"
		case k == sandbox.LabelAutoResume:
			rec.AutoResume = v == "true"
		case k == labelSource:
			rec.Source = v
		}
	}
	if len(rec.Metadata) == 0 {
		rec.Metadata = nil
	}
	return rec
}
