package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"
)

func TestParseOutputTakesTheLastProgressLine(t *testing.T) {
	out := `fuzz: elapsed: 0s, gathering baseline coverage: 0/70 completed
fuzz: elapsed: 0s, gathering baseline coverage: 70/70 completed, now fuzzing with 2 workers
fuzz: elapsed: 3s, execs: 11175 (3724/sec), new interesting: 4 (total: 74)
fuzz: elapsed: 1m0s, execs: 1234567 (20000/sec), new interesting: 12 (total: 82)
PASS
ok  	example.com/m/p	60.021s
`
	r := parseOutput(out)
	if !r.Parsed || r.Execs != 1234567 || r.Elapsed != time.Minute || r.NewInteresting != 12 || r.Crasher != "" {
		t.Fatalf("parseOutput = %+v", r)
	}
}

func TestParseOutputFindsTheCrasher(t *testing.T) {
	out := `fuzz: elapsed: 0s, gathering baseline coverage: 0/3 completed
fuzz: elapsed: 2s, execs: 5120 (2560/sec), new interesting: 1 (total: 4)
--- FAIL: FuzzX (2.05s)
    --- FAIL: FuzzX (0.00s)
        x_test.go:12: boom

    Failing input written to testdata/fuzz/FuzzX/582528ddfad69eb5
    To re-run:
    go test -run=FuzzX/582528ddfad69eb5
FAIL
exit status 1
`
	r := parseOutput(out)
	if r.Crasher != "testdata/fuzz/FuzzX/582528ddfad69eb5" || r.Execs != 5120 {
		t.Fatalf("parseOutput = %+v", r)
	}
	if r := parseOutput("# example.com/m/p\n./x.go:1: syntax error\nFAIL\n"); r.Parsed {
		t.Fatalf("a build error parsed as progress: %+v", r)
	}
}

func TestMarkdown(t *testing.T) {
	got := markdown([]result{{Target: "FuzzA", Pkg: "m/p", Elapsed: 45 * time.Second, Execs: 1000000, NewInteresting: 3, Result: "ok"}})
	for _, want := range []string{"| FuzzA | m/p | 45s | 1,000,000 | 3 | ok |", "| **total** | 1 targets | 45s | 1,000,000 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if group(999) != "999" || group(1000) != "1,000" || group(12345678) != "12,345,678" {
		t.Error("group")
	}
}

func TestIsFuzzFunc(t *testing.T) {
	src := `package p
import "testing"
func FuzzA(f *testing.F) {}
func Fuzz(f *testing.F) {}
func Fuzzy(f *testing.F) {}
func FuzzB(t *testing.T) {}
func FuzzC(f *testing.F, x int) {}
func (s) FuzzD(f *testing.F) {}
func TestE(f *testing.F) {}
`
	f, err := parser.ParseFile(token.NewFileSet(), "p_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && isFuzzFunc(fn) {
			got = append(got, fn.Name.Name)
		}
	}
	if strings.Join(got, ",") != "FuzzA,Fuzz" {
		t.Fatalf("fuzz targets %v, want FuzzA and Fuzz", got)
	}
}
