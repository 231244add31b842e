package node

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// maxTemplateName bounds a promoted template's name, as sandboxd does.
const maxTemplateName = 128

// maxTemplateRedirects caps the holders a template redirect names.
const maxTemplateRedirects = 3

// promoted is one promoted template: a sandbox's disk saved under a pool
// key, which claims of that key clone on demand.
type promoted struct {
	rec sandboxd.TemplateInfo
	dir string // the saved disk; always exists, empty if the guest never wrote
	// users counts claims copying from dir, and retired marks a record
	// replaced or deleted meanwhile: the last user removes dir, so a
	// re-promote never pulls the files from under a clone in progress.
	// Both are guarded by Node.mu.
	users   int
	retired bool
}

// validTemplateName accepts ^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$ without
// an empty path segment ("//") or a parent reference (".."), so a name can
// never read as a path out of wherever a node keeps it.
func validTemplateName(name string) bool {
	if name == "" || len(name) > maxTemplateName || strings.Contains(name, "//") || strings.Contains(name, "..") {
		return false
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._:/-", r)) {
			return false
		}
	}
	return true
}

// promote publishes the sandbox's disk as the template (name, its net, its
// size). A hibernated sandbox is saved as it is, without waking: the disk
// is all the simulator keeps, as for fork and checkpoint.
func (n *Node) promote(c caller, id string, req sandboxd.PromoteRequest) (sandboxd.PromoteResult, *apiError) {
	if !validTemplateName(req.Template) {
		return sandboxd.PromoteResult{}, errorf(http.StatusBadRequest, "invalid template name")
	}
	n.mu.Lock()
	sb, aerr := n.parentLocked(c, id, req.Token)
	if aerr == nil {
		aerr = staysLive(sb, "promote")
	}
	if aerr == nil {
		aerr = refuseArchived(sb, "promote")
	}
	if aerr == nil {
		aerr = refuseFailed(sb, "promote")
	}
	var key sandbox.PoolKey
	if aerr == nil {
		key = sandbox.PoolKey{Template: req.Template, Net: sb.key.Net, Size: sb.key.Size}
		aerr = n.promotableLocked(c, key)
	}
	if aerr != nil {
		n.mu.Unlock()
		return sandboxd.PromoteResult{}, aerr
	}
	guests := sb.guests
	tier := n.cfg.Sizes[sb.key.Size]
	n.mu.Unlock()

	// Save and digest outside the lock; the record appears once complete.
	dir := filepath.Join(n.scratch, newTemplateDirName())
	digest, err := saveTemplate(guests, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		n.log.Warn("promote: saving the disk failed", "node", n.cfg.Name, "sandbox", id, "err", err)
		return sandboxd.PromoteResult{}, errorf(http.StatusInternalServerError, "promote failed")
	}

	n.mu.Lock()
	// A pool or another tenant's promote may have taken the key meanwhile.
	if aerr := n.promotableLocked(c, key); aerr != nil {
		n.mu.Unlock()
		_ = os.RemoveAll(dir)
		return sandboxd.PromoteResult{}, aerr
	}
	old := n.templates[key]
	n.templates[key] = &promoted{
		rec: sandboxd.TemplateInfo{
			Key:           key,
			ContentDigest: digest,
			Tenant:        c.tenantName(),
			CreatedAt:     n.cfg.Clock.Now().UTC(),
			CPUCount:      tier.CPUCount,
			MemTotalBytes: tier.MemoryBytes(),
		},
		dir: dir,
	}
	drop := old != nil && retireLocked(old)
	n.mu.Unlock()
	if drop {
		_ = os.RemoveAll(old.dir)
	}
	n.stats.promotes.Add(1)
	return sandboxd.PromoteResult{Key: key, ContentDigest: digest}, nil
}

// promotableLocked refuses a key a configured pool serves (claims of it
// take warm VMs, never the template) and a key another owner promoted
// (root is the owner ""): an owner replaces only its own template.
func (n *Node) promotableLocked(c caller, key sandbox.PoolKey) *apiError {
	if n.pools[key] != nil {
		return errorf(http.StatusConflict, "template %s is a configured pool", key)
	}
	if tp := n.templates[key]; tp != nil && tp.rec.Tenant != c.tenantName() {
		return errorf(http.StatusConflict, "template %s was promoted by another tenant", key)
	}
	return nil
}

// retireLocked takes a record out of service and reports whether its
// files can go now; otherwise the last claim copying them removes them.
func retireLocked(tp *promoted) bool {
	tp.retired = true
	return tp.users == 0
}

// doneWithTemplate ends one claim's use of tp's files.
func (n *Node) doneWithTemplate(tp *promoted) {
	n.mu.Lock()
	tp.users--
	drop := tp.retired && tp.users == 0
	n.mu.Unlock()
	if drop {
		_ = os.RemoveAll(tp.dir)
	}
}

// saveTemplate copies the sandbox's disk to dir (which always exists
// afterwards, empty when an in-process guest never wrote) and digests it.
func saveTemplate(g *guestSet, dir string) (string, error) {
	if err := g.saveDisk(dir); err != nil {
		return "", fmt.Errorf("save the disk: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("template dir: %w", err)
	}
	return contentDigest(dir)
}

// contentDigest is a saved tree's identity: SHA-256 over one line per
// regular file, in slash-path order, of its relative path, its length and
// the SHA-256 of its bytes ("path\x00len\x00hex\n"; a path holds no NUL,
// so the stream parses one way). Directories, modes, mtimes and links do
// not count, so promoting unchanged files again gives the same digest.
func contentDigest(root string) (string, error) {
	type file struct{ rel, path string }
	var files []file
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files = append(files, file{rel: filepath.ToSlash(rel), path: path})
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("digest %s: %w", root, err)
	}
	// WalkDir orders names per directory ("a/b" before "a.txt"); the
	// digest orders whole paths.
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.rel, b.rel) })
	h := sha256.New()
	for _, f := range files {
		sum, size, err := fileDigest(f.path)
		if err != nil {
			return "", fmt.Errorf("digest %s: %w", f.rel, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00%x\n", f.rel, size, sum)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func fileDigest(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return nil, 0, err
	}
	return h.Sum(nil), size, nil
}

// claimPromoted serves a claim of a promoted key: a clone of tp's saved
// disk, provisioned on demand (no warm pool). tp is nil only for a
// require_promoted claim of a key this node holds no template for: that
// claim redirects to the holders when the node has no pool for the key
// either, and is 404 otherwise. The caller counted one use of tp.
func (n *Node) claimPromoted(ctx context.Context, tenant string, req sandboxd.ClaimRequest, key sandbox.PoolKey, tp *promoted, pooled bool, lease time.Duration, start time.Time) (sandboxd.ClaimResponse, *apiError) {
	if tp == nil {
		if !req.NoRedirect && !pooled {
			if resp, ok := n.peerRedirect(key, false, true); ok {
				return resp, nil
			}
		}
		return sandboxd.ClaimResponse{}, errUnknownTemplate
	}
	defer n.doneWithTemplate(tp)
	sb, tier, aerr := n.provision(ctx, key, tenant, labelsOf(req), lease, origin{template: tp})
	if aerr != nil {
		return sandboxd.ClaimResponse{}, aerr
	}
	n.handOver(sb)
	if sb.guests.machine == nil { // a machine started from tp.dir
		if err := copyTreeIfExists(tp.dir, filepath.Join(n.scratch, sb.id)); err != nil {
			n.log.Warn("template claim: copy scratch failed", "node", n.cfg.Name, "sandbox", sb.id, "err", err)
		}
	}
	n.mu.Lock()
	resp := n.claimResponse(sb)
	n.mu.Unlock()
	tier.Add(1)
	n.stats.templateClaims.Add(1)
	n.stats.claimNanos.Add(int64(time.Since(start)))
	return resp, nil
}

// deleteTemplate removes a promoted template and its files. A tenant
// reaches only its own (anything else is the same 404); root any. When the
// node holds none for the caller it names the mesh members that do, unless
// noRedirect.
func (n *Node) deleteTemplate(c caller, key sandbox.PoolKey, digest string, noRedirect bool) ([]string, *apiError) {
	n.mu.Lock()
	if n.pools[key] != nil {
		n.mu.Unlock()
		return nil, errorf(http.StatusConflict, "template %s is a configured pool", key)
	}
	tp := n.templates[key]
	if tp == nil || (c.kind == callerTenant && tp.rec.Tenant != c.tenant) {
		n.mu.Unlock()
		if !noRedirect {
			if holders := n.templateHolders(key); len(holders) > 0 {
				return holders, nil
			}
		}
		return nil, errUnknownTemplate
	}
	if digest != "" && digest != tp.rec.ContentDigest {
		n.mu.Unlock()
		return nil, errorf(http.StatusPreconditionFailed, "template %s has another digest", key)
	}
	delete(n.templates, key)
	drop := retireLocked(tp)
	n.mu.Unlock()
	if drop {
		_ = os.RemoveAll(tp.dir)
	}
	return nil, nil
}

// HasTemplate answers the gossip question whether this node holds a
// promoted template for key.
func (n *Node) HasTemplate(key sandbox.PoolKey) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.templates[key.WithDefaults()] != nil
}

// templateHolders names up to three peers holding a promoted template for
// key. The caller must not hold n.mu.
func (n *Node) templateHolders(key sandbox.PoolKey) []string {
	if n.cfg.Mesh == nil {
		return nil
	}
	var out []string
	for _, p := range n.cfg.Mesh.Peers(n) {
		if p.HasTemplate(key) {
			out = append(out, p.Addr())
			if len(out) == maxTemplateRedirects {
				break
			}
		}
	}
	return out
}

// templateRowsLocked lists the promoted templates for GET /v1/info, sorted
// by key.
func (n *Node) templateRowsLocked() []sandboxd.TemplateInfo {
	var out []sandboxd.TemplateInfo
	for _, tp := range n.templates {
		out = append(out, tp.rec)
	}
	slices.SortFunc(out, func(a, b sandboxd.TemplateInfo) int {
		return cmp.Or(cmp.Compare(a.Key.Template, b.Key.Template), cmp.Compare(a.Key.Net, b.Key.Net), cmp.Compare(a.Key.Size, b.Key.Size))
	})
	return out
}
