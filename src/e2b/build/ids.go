package build

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// nameRE is a template name: what e2b accepts in an alias, lowercase
// letters, digits, '-', '_' and '.', kept short enough that the name
// sandboxd publishes (PublishedName) stays within its bound.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,49}$`)

// ValidName refuses a name no template may have.
func ValidName(name string) error {
	if !nameRE.MatchString(name) || strings.Contains(name, "..") {
		return errors.New("a template name is 1-50 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// publishedPrefix starts every template name the surface publishes on
// sandboxd, so they never mix with pool images.
const publishedPrefix = "e2b/"

// DefaultTag is the tag of a template named without one, as in e2b.
const DefaultTag = "default"

// maxPublishedName is sandboxd's bound on a template name (its claim name
// grammar allows 63 characters).
const maxPublishedName = 63

// tagRE is a template tag: e2b's tags are short version labels ("v1.2",
// "production").
var tagRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// ValidTag refuses a tag no template may carry.
func ValidTag(tag string) error {
	if !tagRE.MatchString(tag) {
		return errors.New("a template tag is 1-32 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// SplitRef splits a template reference "name:tag" (or "id:tag") into its
// parts; a reference without a tag names DefaultTag.
func SplitRef(ref string) (base, tag string) {
	if i := strings.LastIndexByte(ref, ':'); i >= 0 {
		return ref[:i], ref[i+1:]
	}
	return ref, DefaultTag
}

// PublishedName is the sandboxd template name a build of name in
// namespace is promoted under for tag: the namespace in the name scopes
// it, and each tag is its own promoted template, so moving a tag is one
// re-promote, which sandboxd makes atomic on the node. The default tag
// keeps the bare name.
func PublishedName(namespace, name, tag string) string {
	if tag == DefaultTag {
		return publishedPrefix + namespace + "/" + name
	}
	return publishedPrefix + namespace + "/" + name + ":" + tag
}

// CheckPublished refuses a namespace, name and tag whose published name
// sandboxd would not take.
func CheckPublished(namespace, name, tag string) error {
	if p := PublishedName(namespace, name, tag); len(p) > maxPublishedName {
		return fmt.Errorf("the template's name and tag are too long for this namespace: %q has %d characters, sandboxd takes %d", p, len(p), maxPublishedName)
	}
	return nil
}

// ParsePublished splits a sandboxd template name back into its namespace,
// name and tag; ok is false for names the surface did not publish.
func ParsePublished(published string) (namespace, name, tag string, ok bool) {
	rest, ok := strings.CutPrefix(published, publishedPrefix)
	if !ok {
		return "", "", "", false
	}
	namespace, rest, ok = strings.Cut(rest, "/")
	if !ok || namespace == "" {
		return "", "", "", false
	}
	name, tag = rest, DefaultTag
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		name, tag = rest[:i], rest[i+1:]
		if tag == DefaultTag || ValidTag(tag) != nil {
			return "", "", "", false
		}
	}
	if ValidName(name) != nil {
		return "", "", "", false
	}
	return namespace, name, tag, true
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// TemplateID is the stable id of the template name in namespace: 20
// lowercase letters and digits, as e2b's ids are. Every replica derives
// the same id, so a template built through one is found through another
// with nothing stored.
func TemplateID(namespace, name string) string {
	sum := sha256.Sum256([]byte("e2b-template\x00" + namespace + "\x00" + name))
	return idEncoding.EncodeToString(sum[:])[:20]
}

// PublishedBuildID is the build id reported for a published template the
// process has no build record of (built by another replica, or before a
// restart): derived from its content digest, so it changes exactly when
// the template does.
func PublishedBuildID(digest string) string {
	sum := sha256.Sum256([]byte("e2b-build\x00" + digest))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func sortByCreation(bs []*Build) {
	slices.SortFunc(bs, func(a, b *Build) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func asFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}
