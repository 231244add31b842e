package buildsteps

import (
	"slices"
	"strings"
	"testing"
)

func collect(chunks ...string) []string {
	var got []string
	w := &lineWriter{emit: func(l string) { got = append(got, l) }}
	for _, c := range chunks {
		w.Write([]byte(c))
	}
	w.Flush()
	return got
}

func TestLineWriter(t *testing.T) {
	long := strings.Repeat("a", maxLineBytes+100)
	cases := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"split lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"across chunks", []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"last line without newline", []string{"a\nrest"}, []string{"a", "rest"}},
		{"empty lines kept", []string{"\n\nx\n"}, []string{"", "", "x"}},
		{"carriage return dropped", []string{"dos\r\n"}, []string{"dos"}},
		{"long line cut", []string{long[:3000], long[3000:] + "\nnext\n"}, []string{long[:maxLineBytes] + truncatedMark, "next"}},
		{"long line without end", []string{long}, []string{long[:maxLineBytes] + truncatedMark}},
		{"exactly the cap", []string{long[:maxLineBytes] + "\n"}, []string{long[:maxLineBytes]}},
		{"invalid UTF-8", []string{"a\xffb\n"}, []string{"a\uFFFDb"}},
		{"nothing", nil, nil},
	}
	for _, c := range cases {
		if got := collect(c.chunks...); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, abbreviate(got), abbreviate(c.want))
		}
	}
}

func abbreviate(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 40 {
			l = l[:20] + "…" + l[len(l)-20:]
		}
		out[i] = l
	}
	return out
}

func TestTail(t *testing.T) {
	var tl tail
	for i := range 30 {
		tl.add(strings.Repeat("x", i))
	}
	got := strings.Split(tl.String(), "\n")
	if len(got) != tailLines || got[len(got)-1] != strings.Repeat("x", 29) {
		t.Errorf("tail kept %d lines ending %q", len(got), got[len(got)-1])
	}
	var big tail
	for range 5 {
		big.add(strings.Repeat("y", 2000))
	}
	if s := big.String(); len(s) > tailBytes || !strings.HasSuffix(s, "y") {
		t.Errorf("tail of big lines is %d bytes", len(s))
	}
}

func TestDirMode(t *testing.T) {
	for mode, want := range map[string]string{"0644": "0755", "0600": "0700", "0755": "0755", "0640": "0750", "0000": "0000", "755": "0755", "4755": "4755"} {
		if got := dirMode(mode); got != want {
			t.Errorf("dirMode(%s) = %s, want %s", mode, got, want)
		}
	}
}
