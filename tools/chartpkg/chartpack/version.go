package chartpack

import (
	"fmt"
	"strings"
)

// DefaultImageVersion is the version the images are built with when no
// --define IMAGE_VERSION is given (images/image.bzl), and so the packager's
// default too.
const DefaultImageVersion = "dev"

// ChartVersion maps an image version (IMAGE_VERSION, the tag the images are
// pushed under) to the chart's version, which Helm requires to be SemVer 2:
//
//   - a SemVer 2 version, with or without a leading "v", is the chart
//     version without the "v": v1.2.3 and 1.2.3 give 1.2.3, v1.3.0-rc.1
//     gives 1.3.0-rc.1;
//   - anything else is a pre-release of 0.0.0 named after it: dev gives
//     0.0.0-dev, main gives 0.0.0-main, sha-0a1b2c3 gives 0.0.0-sha-0a1b2c3.
//
// The image tags and appVersion are the image version unchanged. A version
// that is neither (say feature_x, whose underscore SemVer does not allow) is
// refused. tools/chartpkg/chart.bzl mirrors this rule to name the archive.
func ChartVersion(imageVersion string) (string, error) {
	if err := CheckTag(imageVersion); err != nil {
		return "", err
	}
	if v := strings.TrimPrefix(imageVersion, "v"); IsSemVer(v) {
		return v, nil
	}
	if v := "0.0.0-" + imageVersion; IsSemVer(v) {
		return v, nil
	}
	return "", fmt.Errorf("image version %q maps to no SemVer 2 chart version: use a SemVer version (v1.2.3) or a tag made of dot-separated [0-9A-Za-z-] parts without leading zeros in numeric parts (dev, main, sha-0a1b2c3)", imageVersion)
}

// CheckTag reports whether s is usable as an image tag: 1 to 128 characters
// from [A-Za-z0-9_.-], not starting with '.' or '-'.
func CheckTag(s string) error {
	if s == "" {
		return fmt.Errorf("empty image version")
	}
	if len(s) > 128 {
		return fmt.Errorf("image version %q is longer than an image tag may be (128)", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := isAlnum(c) || c == '_' || (i > 0 && (c == '.' || c == '-'))
		if !ok {
			return fmt.Errorf("image version %q is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*)", s)
		}
	}
	return nil
}

// IsSemVer reports whether v is a SemVer 2.0.0 version:
// MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading "v".
func IsSemVer(v string) bool {
	rest, build, hasBuild := strings.Cut(v, "+")
	if hasBuild && !allIdents(build, false) {
		return false
	}
	core, pre, hasPre := strings.Cut(rest, "-")
	if hasPre && !allIdents(pre, true) {
		return false
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if !isNumber(p) {
			return false
		}
	}
	return true
}

// allIdents checks dot-separated identifiers of [0-9A-Za-z-]; in a
// pre-release a purely numeric identifier must not have a leading zero.
func allIdents(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		numeric := true
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !isAlnum(c) && c != '-' {
				return false
			}
			if c < '0' || c > '9' {
				numeric = false
			}
		}
		if pre && numeric && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// isNumber is a SemVer numeric identifier: digits, no leading zero.
func isNumber(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
