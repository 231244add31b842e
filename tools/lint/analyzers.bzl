"""The analyzers nogo runs on every Go package of this repository.

nogo runs them while Bazel compiles (docs/build.md, "Checks the build
enforces"); a finding fails the build. Only this repository's packages are
checked: MODULE.bazel's go_sdk.nogo scopes nogo to //:__subpackages__.
"""

load("@io_bazel_rules_go//go:def.bzl", "TOOLS_NOGO")

# VET is what `go vet` runs (`go tool vet help`, Go 1.26), named by their
# package under golang.org/x/tools/go/analysis/passes. Left out: cgocall,
# which rules_go cannot feed the raw cgo sources it needs (rules_go #2396);
# loopclosure, which guards against the shared loop variable of Go before
# 1.22: go.mod's language version gives every iteration its own variable,
# but nogo does not tell the analyzer that version, so it reports correct
# code.
VET = [
    "appends",
    "asmdecl",
    "assign",
    "atomic",
    "bools",
    "buildtag",
    "composite",
    "copylock",
    "defers",
    "directive",
    "errorsas",
    "framepointer",
    "hostport",
    "httpresponse",
    "ifaceassert",
    "lostcancel",
    "nilfunc",
    "printf",
    "shift",
    "sigchanyzer",
    "slog",
    "stdmethods",
    "stdversion",
    "stringintconv",
    "structtag",
    "testinggoroutine",
    "tests",
    "timeformat",
    "unmarshal",
    "unreachable",
    "unsafeptr",
    "unusedresult",
    "waitgroup",
]

# STATICCHECK is staticcheck's SA ("staticcheck") class from
# honnef.co/go/tools: each reports code that is wrong or does nothing, such as
# invalid regular expressions, time formats or struct tags, a WaitGroup.Add
# inside the goroutine, a deferred Lock, an impossible comparison or type
# assertion, a value written and never read, an append whose result is lost,
# a nil map write, infinite recursion.
# Left out on purpose:
#   - the S (simplifications), ST (style) and QF (quick fixes) classes and
#     U1000 (unused code): style, not bugs;
#   - SA1019 (use of a deprecated identifier): a maintenance signal, not a bug;
#   - SA6000-SA6006: performance advice;
#   - SA9003 (empty branch): off by default in staticcheck itself, style;
#   - SA5011 (nil dereference after a nil check): disabled in this release of
#     staticcheck (it panics if run; its analysis no longer works);
#   - SA5012 (odd-length slice for key/value pairs): it exports facts, so nogo
#     would have to run its SSA analysis on every package of every dependency
#     (all of Kubernetes), which would cost minutes of every cold build.
STATICCHECK = [
    "sa1000",
    "sa1001",
    "sa1002",
    "sa1003",
    "sa1004",
    "sa1005",
    "sa1006",
    "sa1007",
    "sa1008",
    "sa1010",
    "sa1011",
    "sa1012",
    "sa1013",
    "sa1014",
    "sa1015",
    "sa1016",
    "sa1017",
    "sa1018",
    "sa1020",
    "sa1021",
    "sa1023",
    "sa1024",
    "sa1025",
    "sa1026",
    "sa1027",
    "sa1028",
    "sa1029",
    "sa1030",
    "sa1031",
    "sa1032",
    "sa2000",
    "sa2001",
    "sa2002",
    "sa2003",
    "sa3000",
    "sa3001",
    "sa4000",
    "sa4001",
    "sa4003",
    "sa4004",
    "sa4005",
    "sa4006",
    "sa4008",
    "sa4009",
    "sa4010",
    "sa4011",
    "sa4012",
    "sa4013",
    "sa4014",
    "sa4015",
    "sa4016",
    "sa4017",
    "sa4018",
    "sa4019",
    "sa4020",
    "sa4021",
    "sa4022",
    "sa4023",
    "sa4024",
    "sa4025",
    "sa4026",
    "sa4027",
    "sa4028",
    "sa4029",
    "sa4030",
    "sa4031",
    "sa4032",
    "sa5000",
    "sa5001",
    "sa5002",
    "sa5003",
    "sa5004",
    "sa5005",
    "sa5007",
    "sa5008",
    "sa5009",
    "sa5010",
    "sa9001",
    "sa9002",
    "sa9004",
    "sa9005",
    "sa9006",
    "sa9007",
    "sa9008",
    "sa9009",
    "sa9010",
]

# rules_go's own golang.org/x/tools repository (the one TOOLS_NOGO names), so
# this module need not import it itself.
_X_TOOLS = TOOLS_NOGO[0].split("//")[0]

ANALYZERS = (
    [_X_TOOLS + "//go/analysis/passes/" + a for a in VET] +
    ["@co_honnef_go_tools//staticcheck/" + a for a in STATICCHECK]
)
