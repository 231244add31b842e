package e2b

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/buildsteps"
	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Step names the SDK maps back to the user's source: the base, and the
// start and ready commands with the publish.
const (
	stepBase     = "base"
	stepFinalize = "finalize"
)

// buildClaimPrefix starts the claim name of a build's sandbox, so
// kubectl get sandboxes shows what it is.
const buildClaimPrefix = "e2b-build-"

// runBuild is the build.Runner: claim a sandbox of the base on the
// isolated lane (sandboxd publishes only those), run the steps in it
// through its envd, publish it with promote, and release it whatever
// happened. The claim's lease is the build timeout, so a process that
// dies mid-build leaves nothing claimed past it.
func (s *Server) runBuild(ctx context.Context, b *build.Build) error {
	def, ok := b.Definition().(buildDefinition)
	if !ok {
		return &build.Failure{Step: stepBase, Message: "the build has no definition"}
	}
	key := def.base.Key.WithDefaults()
	if def.base.Promoted == nil {
		key.Net = NetNone
	}
	b.Log(stepBase, build.LevelInfo, fmt.Sprintf("Claiming a sandbox of %s", describeBase(def.template)))
	ref := sandbox.ClaimRef{Namespace: b.Namespace, Name: buildClaimPrefix + strings.ToLower(rand.Text()[:16])}
	ttl := int(max(s.builds.Timeout()/time.Second, 1))
	// The claim does not end with the build's context: a claim canceled
	// in flight may still be made on the node, with no answer to release
	// it by, and a canceled build must leave nothing claimed. It is
	// bounded like a request instead, and the cancel is seen right after.
	claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	claimed, err := s.claimSource(claimCtx, ref, def.base, key, ttl, nil, claimTerms{})
	cancelClaim()
	if err != nil {
		return &build.Failure{Step: stepBase, Message: "could not claim a sandbox of the base: " + s.buildErr(err)}
	}
	defer s.releaseQuietly(claimed.Sandbox)
	if err := ctx.Err(); err != nil {
		return &build.Failure{Step: stepBase, Message: s.buildErr(err)}
	}
	access := envdtoken.Derive(s.cfg.EnvdSecret, claimed.Token)
	if err := s.initEnvd(ctx, claimed, access, nil); err != nil {
		return &build.Failure{Step: stepBase, Message: "the base sandbox's envd could not be initialized: " + s.buildErr(err)}
	}
	guest := buildsteps.Guest{HTTPClient: s.relayClient(claimed), BaseURL: "http://envd", AccessToken: access}
	defer guest.HTTPClient.CloseIdleConnections()
	err = buildsteps.Run(ctx, guest, def.template, archives{store: s.cfg.Builds.Store, templateID: b.TemplateID}, b.Log)
	if err != nil {
		var se *buildsteps.StepError
		if errors.As(err, &se) {
			return &build.Failure{Step: se.Step, Message: se.Message}
		}
		return &build.Failure{Step: stepFinalize, Message: s.buildErr(err)}
	}
	b.Log(stepFinalize, build.LevelInfo, "Publishing the template")
	for _, tag := range b.Tags {
		res, err := s.publishTag(ctx, claimed, b.Namespace, b.Name, tag, b.ID)
		if err != nil {
			return &build.Failure{Step: stepFinalize, Message: fmt.Sprintf("publishing tag %s of the template failed: %s", tag, s.buildErr(err))}
		}
		s.dropOtherCopies(ctx, res.Key, res.ContentDigest, claimed.NodeAddr, func(err error) {
			b.Log(stepFinalize, build.LevelWarn, "An earlier build of the template could not be removed from one node; it is replaced there on its next build")
			s.log.Warn("e2b: removing an earlier template build failed", "template", b.TemplateID, "err", err)
		})
		b.Log(stepFinalize, build.LevelInfo, fmt.Sprintf("Template %s:%s published (%s)", b.Name, tag, res.ContentDigest))
	}
	s.catalog.Invalidate()
	return nil
}

// publishTag promotes the claimed sandbox as tag of the namespace's
// template name and labels the result with the build it holds. A label
// that cannot be written leaves the tag published with a build id derived
// from its digest, which is what it reports then.
func (s *Server) publishTag(ctx context.Context, claimed fleet.Claimed, namespace, name, tag, buildID string) (*sandboxd.PromoteResult, error) {
	res, err := s.fleet.Promote(ctx, claimed, build.PublishedName(namespace, name, tag))
	if err != nil {
		return nil, err
	}
	if err := s.fleet.LabelTemplate(ctx, claimed.NodeAddr, res.Key, map[string]string{catalog.BuildLabel: buildID}, res.ContentDigest); err != nil {
		s.log.Warn("e2b: labelling a published tag with its build failed", "template", res.Key.Template, "err", err)
	}
	return res, nil
}

// dropOtherCopies deletes a published template's earlier copies from
// nodes other than owner, each only while it still has the digest it was
// read with, so a rebuild or a moved tag leaves one template behind, not
// one per node it ran on. failed hears of a copy that could not be
// removed; it is replaced there on the next publish.
func (s *Server) dropOtherCopies(ctx context.Context, key sandbox.PoolKey, digest, owner string, failed func(error)) {
	for _, n := range s.fleet.NodeTemplates(ctx) {
		if n.Addr == owner || n.Err != nil {
			continue
		}
		for _, t := range n.Templates {
			if t.Key.WithDefaults() != key.WithDefaults() || t.ContentDigest == digest {
				continue
			}
			if err := s.fleet.DeleteTemplate(ctx, n.Addr, t.Key, t.ContentDigest); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
				failed(err)
			}
		}
	}
}

// buildErr is what a build's log says of a fleet failure: the class, not
// the addresses it names.
func (s *Server) buildErr(err error) string {
	switch {
	case errors.Is(err, fleet.ErrNoTemplate), errors.Is(err, sandboxd.ErrNotFound), errors.Is(err, fleet.ErrNotFound):
		return "not found"
	case errors.Is(err, sandboxd.ErrCapacity):
		return "no warm sandbox is available for the base now; retry later"
	case errors.Is(err, context.DeadlineExceeded):
		return "the build timed out"
	case errors.Is(err, context.Canceled):
		return "the build was canceled"
	case errors.Is(err, sandboxd.ErrConflict):
		return "the node refused it in the sandbox's state"
	case errors.Is(err, sandboxd.ErrUnavailable), errors.Is(err, sandboxd.ErrGuestUnreachable):
		return "the node could not be reached"
	}
	s.log.Warn("e2b: a build step failed", "err", err)
	return "internal error"
}

func describeBase(t buildsteps.Template) string {
	if t.FromTemplate != "" {
		return "template " + t.FromTemplate
	}
	return "image " + t.FromImage
}

// relayClient is an HTTP client of the claimed sandbox's envd through its
// node's guest-port relay, under the sandbox's own token; the fleet bounds
// each dial's handshake by its node timeout.
func (s *Server) relayClient(claimed fleet.Claimed) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return s.fleet.DialPort(ctx, claimed.Sandbox, claimed.Token, sandboxd.EnvdPort)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// archives reads a template's uploaded archives from the build store.
type archives struct {
	store interface {
		Open(ctx context.Context, templateID, hash string) (io.ReadCloser, error)
	}
	templateID string
}

func (a archives) Open(ctx context.Context, hash string) (io.ReadCloser, error) {
	return a.store.Open(ctx, a.templateID, hash)
}
