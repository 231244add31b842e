package chartpack

import (
	"fmt"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"
)

// The stamping edits Chart.yaml and values.yaml as text, line by line, so
// their comments survive (`helm show values` prints values.yaml as it is),
// and then proves the edit: the stamped file must parse to exactly the
// original document with the stamped fields changed. Anything the line
// editor cannot handle (flow mappings, block scalars that look like keys)
// fails that proof instead of producing a wrong chart.

// stampChartYAML sets the top-level version and appVersion of Chart.yaml.
func stampChartYAML(raw []byte, version, appVersion string) ([]byte, error) {
	want := map[string]string{"version": version, "appVersion": quote(appVersion)}
	lines := strings.Split(string(raw), "\n")
	seen := map[string]bool{}
	for i, line := range lines {
		key, _, ok := strings.Cut(line, ":")
		if !ok || key != strings.TrimSpace(key) {
			continue // not a top-level key
		}
		if v, stamp := want[key]; stamp {
			if seen[key] {
				return nil, fmt.Errorf("Chart.yaml: %s appears twice", key)
			}
			seen[key] = true
			lines[i] = key + ": " + v
		}
	}
	if !seen["version"] {
		return nil, fmt.Errorf("Chart.yaml: no top-level version line to stamp")
	}
	if !seen["appVersion"] {
		// Add it right after version.
		for i, line := range lines {
			if strings.HasPrefix(line, "version:") {
				lines = append(lines[:i+1], append([]string{"appVersion: " + want["appVersion"]}, lines[i+1:]...)...)
				break
			}
		}
	}
	out := []byte(strings.Join(lines, "\n"))

	var before, after map[string]any
	if err := yaml.Unmarshal(raw, &before); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	if err := yaml.Unmarshal(out, &after); err != nil {
		return nil, fmt.Errorf("Chart.yaml after stamping: %w", err)
	}
	before["version"], before["appVersion"] = version, appVersion
	if !reflect.DeepEqual(before, after) {
		return nil, fmt.Errorf("Chart.yaml: stamping version and appVersion changed more than those two fields")
	}
	return out, nil
}

// stampValuesYAML sets every image tag in values.yaml (the value of a key
// `tag` inside a mapping under a key `image`, at any depth) to tag, and
// returns the dotted paths it set.
func stampValuesYAML(raw []byte, tag string) ([]byte, []string, error) {
	type frame struct {
		indent int
		key    string
	}
	var (
		stack   []frame
		stamped []string
	)
	lines := strings.Split(string(raw), "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		content := line[indent:]
		// A list item opens a frame of its own; a mapping written on the
		// item's line ("- key: value") continues two columns in.
		for strings.HasPrefix(content, "- ") || content == "-" {
			for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
				stack = stack[:len(stack)-1]
			}
			stack = append(stack, frame{indent, "[]"})
			content = strings.TrimLeft(strings.TrimPrefix(content, "-"), " ")
			indent = len(line) - len(content)
		}
		key, value, isKey := strings.Cut(content, ":")
		if !isKey || strings.ContainsAny(key, " \"'{[") || (value != "" && value[0] != ' ') {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		if key == "tag" && len(stack) > 0 && stack[len(stack)-1].key == "image" {
			comment := ""
			if v := strings.TrimSpace(value); v != "" && v[0] != '"' && v[0] != '\'' {
				if j := strings.Index(value, " #"); j >= 0 {
					comment = " " + strings.TrimSpace(value[j:])
				}
			}
			lines[i] = line[:indent] + "tag: " + quote(tag) + comment
			path := make([]string, 0, len(stack)+1)
			for _, f := range stack {
				path = append(path, f.key)
			}
			stamped = append(stamped, strings.Join(append(path, "tag"), "."))
		}
		stack = append(stack, frame{indent, key})
	}
	out := []byte(strings.Join(lines, "\n"))

	var before, after any
	if err := yaml.Unmarshal(raw, &before); err != nil {
		return nil, nil, fmt.Errorf("values.yaml: %w", err)
	}
	if err := yaml.Unmarshal(out, &after); err != nil {
		return nil, nil, fmt.Errorf("values.yaml after stamping: %w", err)
	}
	n := setImageTags(before, tag)
	if n != len(stamped) || !reflect.DeepEqual(before, after) {
		return nil, nil, fmt.Errorf("values.yaml: could not stamp its %d image tag(s) line by line (stamped %v); write each image as a block mapping with `tag:` on a line of its own", n, stamped)
	}
	return out, stamped, nil
}

// setImageTags sets tag in every mapping under a key "image" that has a
// key "tag", and counts them.
func setImageTags(v any, tag string) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if img, ok := child.(map[string]any); ok && k == "image" {
				if _, ok := img["tag"]; ok {
					img["tag"] = tag
					n++
				}
			}
			n += setImageTags(child, tag)
		}
	case []any:
		for _, child := range v {
			n += setImageTags(child, tag)
		}
	}
	return n
}

// quote writes s as a YAML double-quoted string; the callers pass image
// tags and versions, which hold no character that needs escaping.
func quote(s string) string { return `"` + s + `"` }
