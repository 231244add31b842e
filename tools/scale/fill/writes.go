package fill

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// requestTotalMetric counts the kube-apiserver's requests by verb,
// resource and subresource (among other labels).
const requestTotalMetric = "apiserver_request_total"

// writeVerbs are the verb label values of apiserver_request_total that
// change state. The apiserver reports most writes by HTTP method (POST,
// PUT, PATCH, DELETE) and a few by their own name (APPLY for server-side
// apply, DELETECOLLECTION); CREATE and UPDATE are kept in case a version
// reports those.
var writeVerbs = map[string]bool{
	"POST": true, "PUT": true, "PATCH": true, "DELETE": true,
	"APPLY": true, "DELETECOLLECTION": true, "CREATE": true, "UPDATE": true,
}

// Writes is a count of kube-apiserver write requests.
type Writes struct {
	// Total is every write request.
	Total int `json:"total"`
	// ByResource splits Total by resource, as "resource" or
	// "resource/subresource" (e.g. "sandboxwarmpools/status").
	ByResource map[string]int `json:"by_resource"`
}

// Minus is the writes of w that b had not seen yet: w − b per resource,
// leaving out resources with no difference.
func (w Writes) Minus(b Writes) Writes {
	out := Writes{Total: w.Total - b.Total, ByResource: map[string]int{}}
	for k, v := range w.ByResource {
		if d := v - b.ByResource[k]; d != 0 {
			out.ByResource[k] = d
		}
	}
	return out
}

// readWrites scrapes the kube-apiserver's /metrics and sums its write
// requests so far.
func readWrites(ctx context.Context, client kubernetes.Interface) (Writes, error) {
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Writes{}, fmt.Errorf("reading the kube-apiserver's /metrics: %w", err)
	}
	w, err := parseWrites(raw)
	if err != nil {
		return Writes{}, fmt.Errorf("parsing the kube-apiserver's /metrics: %w", err)
	}
	return w, nil
}

// parseWrites sums the write verbs of apiserver_request_total in a
// Prometheus text exposition.
func parseWrites(exposition []byte) (Writes, error) {
	w := Writes{ByResource: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, requestTotalMetric+"{") {
			continue
		}
		labels, value, err := parseSample(line[len(requestTotalMetric):])
		if err != nil {
			return Writes{}, fmt.Errorf("%s sample %q: %w", requestTotalMetric, line, err)
		}
		if !writeVerbs[labels["verb"]] {
			continue
		}
		n := int(value)
		resource := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		w.Total += n
		w.ByResource[resource] += n
	}
	if err := sc.Err(); err != nil {
		return Writes{}, err
	}
	return w, nil
}

// parseSample reads `{name="value",...} number [timestamp]`, the part of
// a text-format sample after the metric name. Label values may hold
// escaped quotes, backslashes and newlines, and commas.
func parseSample(s string) (map[string]string, float64, error) {
	if !strings.HasPrefix(s, "{") {
		return nil, 0, errors.New("no label set")
	}
	labels := map[string]string{}
	i := 1
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return nil, 0, errors.New("unterminated label set")
		}
		if s[i] == '}' {
			i++
			break
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq <= 0 {
			return nil, 0, errors.New("label without a name")
		}
		name := strings.TrimSpace(s[i : i+eq])
		i += eq + 1
		if i >= len(s) || s[i] != '"' {
			return nil, 0, fmt.Errorf("label %s: value not quoted", name)
		}
		i++
		var v strings.Builder
		closed := false
		for i < len(s) {
			c := s[i]
			i++
			if c == '"' {
				closed = true
				break
			}
			if c == '\\' && i < len(s) {
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[i])
				}
				i++
				continue
			}
			v.WriteByte(c)
		}
		if !closed {
			return nil, 0, fmt.Errorf("label %s: unterminated value", name)
		}
		labels[name] = v.String()
	}
	fields := strings.Fields(s[i:])
	if len(fields) == 0 {
		return nil, 0, errors.New("no value")
	}
	value, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return nil, 0, fmt.Errorf("value: %w", err)
	}
	return labels, value, nil
}
