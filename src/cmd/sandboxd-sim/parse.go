package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

func readTenants(path string) ([]node.Tenant, error) {
	if path == "" {
		return nil, nil
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []node.Tenant
	sc := bufio.NewScanner(file)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 2 || len(fields) > 3 {
			// Never echo the line: it holds a token.
			return nil, fmt.Errorf("line %d: want <name> <token> [max_claims]", line)
		}
		t := node.Tenant{Name: fields[0], Token: fields[1]}
		if len(fields) == 3 {
			n, err := strconv.Atoi(fields[2])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("line %d: max_claims must be a non-negative integer", line)
			}
			t.MaxClaims = n
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// parsePools parses <template>:<net>:<size>=<warm>,… . The template may
// itself contain colons (base:24.04), so net and size are the last two
// colon-separated fields.
func parsePools(spec string) ([]sandboxd.PoolSpec, error) {
	var out []sandboxd.PoolSpec
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		keyPart, warmPart, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: missing =<warm>", item)
		}
		warm, err := strconv.Atoi(warmPart)
		if err != nil || warm < 0 {
			return nil, fmt.Errorf("%q: warm must be a non-negative integer", item)
		}
		parts := strings.Split(keyPart, ":")
		if len(parts) < 3 {
			return nil, fmt.Errorf("%q: want <template>:<net>:<size>=<warm>", item)
		}
		size, netName := parts[len(parts)-1], parts[len(parts)-2]
		template := strings.Join(parts[:len(parts)-2], ":")
		if template == "" {
			return nil, fmt.Errorf("%q: empty template", item)
		}
		out = append(out, sandboxd.PoolSpec{Template: template, Net: netName, Size: size, Warm: warm})
	}
	return out, nil
}

func parsePorts(spec string) ([]int, error) {
	out := []int{} // non-nil: an empty flag means no echo guest
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q is not a port", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseJoin reads --join: host:port addresses with a numeric port.
func parseJoin(spec string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(spec, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q is not host:port", a)
		}
		out = append(out, a)
	}
	return out, nil
}
