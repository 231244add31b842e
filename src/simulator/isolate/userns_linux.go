package isolate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Run as root, each sandbox is also its own user namespace: root and every
// other id inside map to a range of host ids no other sandbox (of any
// runtime on the host) holds at the same time, so what the kernel keys by
// uid (keyrings, signals, the process and file limits per user, ownership
// of anything that leaks out) is never shared between sandboxes or with the
// host's own users, and a process that escaped its mount namespace would
// be nobody to the host's files.
//
// Files keep their ordinary ids on disk: the root filesystem, its layers
// and the writable layer are mounted into the sandbox through idmapped
// mounts (made by the host, which holds the privilege, and handed to the
// init as descriptors), so inside they show their on-disk owners and what
// the sandbox writes is stored with its inside ids. A saved layer therefore
// starts another sandbox, with another range, unchanged.

// idRangeSize is the ids each sandbox maps: 0..65535 inside.
const idRangeSize = 1 << 16

// idRangeFirst is the first host id handed out; the slots above it never
// meet the host's own users and groups.
const idRangeFirst = 1 << 28

// idRangeSlots bounds the ranges that can be held at once on a host.
const idRangeSlots = 4096

// idRangeLockDirs are tried in order for the slot locks, which must be one
// directory for every runtime on the host: /run is per boot, so a crash
// leaves no lock behind (flock ends with its holder anyway).
var idRangeLockDirs = []string{"/run/sandbox-operator/idmap", filepath.Join(os.TempDir(), "sandbox-operator-idmap")}

// idRange is a held range of host ids: base is what root inside is on the
// host. Release gives it back.
type idRange struct {
	base uint32
	lock *os.File
}

func (r *idRange) release() {
	if r != nil && r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
}

// acquireIDRange takes a free slot, starting the search at hint so that
// concurrent runtimes rarely contend for the same one.
func acquireIDRange(hint int) (*idRange, error) {
	var dir string
	var errs []error
	for _, d := range idRangeLockDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		dir = d
		break
	}
	if dir == "" {
		return nil, fmt.Errorf("isolate: no directory for the id range locks: %w", errors.Join(errs...))
	}
	for i := range idRangeSlots {
		slot := (hint + i) % idRangeSlots
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(slot)), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("isolate: id range lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return nil, fmt.Errorf("isolate: id range lock: %w", err)
		}
		return &idRange{base: idRangeFirst + uint32(slot)*idRangeSize, lock: f}, nil
	}
	return nil, fmt.Errorf("isolate: all %d id ranges are held", idRangeSlots)
}

// idmappedView is one idmapped mount handed to the init: the host tree
// Source shows at Target in the init's mount namespace, with on-disk ids
// mapped through the sandbox's user namespace.
type idmappedView struct {
	Source, Target string
	ReadOnly       bool
	// Optional views whose filesystem cannot be idmapped are handed over
	// as plain clones.
	Optional bool
}

// openIdmapped clones each view's source as a detached mount idmapped by
// the user namespace of pid, and returns the mounts' descriptors, in
// order; the caller closes them.
func openIdmapped(pid int, views []idmappedView) (_ []int, err error) {
	userns, err := unix.Open(filepath.Join("/proc", strconv.Itoa(pid), "ns", "user"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("isolate: the sandbox's user namespace: %w", err)
	}
	defer unix.Close(userns)
	fds := make([]int, 0, len(views))
	defer func() {
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}()
	for _, v := range views {
		fd, err := unix.OpenTree(unix.AT_FDCWD, v.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("isolate: clone the mount of %s: %w", v.Source, err)
		}
		fds = append(fds, fd)
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}
		if v.ReadOnly {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			if !v.Optional {
				return nil, fmt.Errorf("isolate: idmap the mount of %s: %w", v.Source, err)
			}
			attr.Attr_set &^= unix.MOUNT_ATTR_IDMAP
			attr.Userns_fd = 0
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
				return nil, fmt.Errorf("isolate: mount attributes of %s: %w", v.Source, err)
			}
		}
	}
	return fds, nil
}

// The views are attached in the init's mount namespace by a short-lived
// helper (the attach stage): a mount made by the host belongs to the
// host's user namespace, so the init may not place it, and the host's own
// threads cannot enter another mount namespace without leaving a thread
// behind in it. The helper also opens the sandbox directory there and
// hands it to the init, which works from it: the init, root of its own
// namespace but nobody to the host, could not walk the host's private
// directories on the way to it.

// attachRequest is what the host sends the attach stage on fdAttachSpec.
type attachRequest struct {
	PID     int
	Dir     string
	Targets []string // absolute, one per mount descriptor from fdAttachMounts on
}

// Descriptors of the attach stage.
const (
	fdAttachSpec   = 3 // host → helper: the attachRequest, JSON
	fdAttachSock   = 4 // helper → init: the sandbox directory (SCM_RIGHTS)
	fdAttachMounts = 5 // host → helper: the idmapped mounts, in order
)

// attachViews runs the attach stage for the init pid: it attaches fds (the
// idmapped mounts, in the order of views) at their targets in the init's
// mount namespace and hands the init its directory over sock. It owns and
// closes fds.
func attachViews(pid int, dir string, views []idmappedView, fds []int, sock *os.File) error {
	req := attachRequest{PID: pid, Dir: dir}
	files := []*os.File{nil, sock}
	for i, v := range views {
		req.Targets = append(req.Targets, v.Target)
		f := os.NewFile(uintptr(fds[i]), "view")
		// Closed through its File only: a second close of the bare
		// number could close another file that took it since.
		defer f.Close()
		files = append(files, f)
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer specR.Close()
	files[0] = specR
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"isolate-attach"}
	cmd.Env = []string{envStage + "=" + stageAttach}
	cmd.ExtraFiles = files
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		specW.Close()
		return fmt.Errorf("isolate: start the attach helper: %w", err)
	}
	err = json.NewEncoder(specW).Encode(req)
	specW.Close()
	if werr := cmd.Wait(); werr != nil || err != nil {
		return fmt.Errorf("isolate: attach the views: %v %v: %s", err, werr, strings.TrimSpace(out.String()))
	}
	return nil
}

// runAttach is the attach stage. It never returns.
func runAttach() {
	if err := attachInNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func attachInNamespace() error {
	var req attachRequest
	if err := json.NewDecoder(os.NewFile(fdAttachSpec, "spec")).Decode(&req); err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	// This thread alone enters the init's mount namespace; the process
	// exits right after.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare the filesystem context: %w", err)
	}
	ns, err := unix.Open(filepath.Join("/proc", strconv.Itoa(req.PID), "ns", "mnt"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the sandbox's mount namespace: %w", err)
	}
	if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("enter the sandbox's mount namespace: %w", err)
	}
	for i, target := range req.Targets {
		if err := unix.MoveMount(fdAttachMounts+i, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the idmapped view at %s: %w", target, err)
		}
	}
	dir, err := unix.Open(req.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox directory: %w", err)
	}
	if err := unix.Sendmsg(fdAttachSock, []byte{1}, unix.UnixRights(dir), nil, 0); err != nil {
		return fmt.Errorf("hand the sandbox directory to the init: %w", err)
	}
	return nil
}

// enterSandboxDir is the init's side: it receives its directory from the
// attach stage and makes it the working directory, from which every path
// of its spec is relative.
func enterSandboxDir(sock *os.File) error {
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
	sock.Close()
	if err != nil {
		return fmt.Errorf("receive the sandbox directory: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("receive the sandbox directory: %d control messages, %v", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("receive the sandbox directory: %d descriptors, %v", len(fds), err)
	}
	defer unix.Close(fds[0])
	if err := unix.Fchdir(fds[0]); err != nil {
		return fmt.Errorf("enter the sandbox directory: %w", err)
	}
	return nil
}

// rootSources are the trees a sandbox's root is built from, as the init
// names them: the directory holding the writable layer's upper and work
// directories, the root filesystem, the layers over it, and the mounts.
type rootSources struct {
	Layer  string
	RootFS string
	Layers []string
	Mounts []Mount
}

// prepareViews takes an id range for the sandbox and plans the idmapped
// views of src that the init builds its root from. The returned sources
// are relative to the sandbox directory, which is handed to the sandbox's
// root so that the init may enter it.
func (s *Sandbox) prepareViews(src rootSources) (rootSources, []idmappedView, error) {
	ids, err := acquireIDRange(rand.IntN(idRangeSlots))
	if err != nil {
		return rootSources{}, nil, err
	}
	s.ids = ids
	if err := os.Chown(s.dir, int(ids.base), int(ids.base)); err != nil {
		return rootSources{}, nil, fmt.Errorf("isolate: hand the sandbox dir to its root: %w", err)
	}
	if err := os.Mkdir(filepath.Join(s.dir, viewDir), 0o755); err != nil {
		return rootSources{}, nil, err
	}
	var planned []idmappedView
	add := func(name, source string, readOnly, optional bool) (string, error) {
		rel := filepath.Join(viewDir, name)
		target := filepath.Join(s.dir, rel)
		if err := os.Mkdir(target, 0o755); err != nil {
			return "", err
		}
		planned = append(planned, idmappedView{Source: source, Target: target, ReadOnly: readOnly, Optional: optional})
		return rel, nil
	}
	var out rootSources
	if out.Layer, err = add("layer", src.Layer, false, false); err != nil {
		return rootSources{}, nil, err
	}
	if out.RootFS, err = add("rootfs", src.RootFS, true, false); err != nil {
		return rootSources{}, nil, err
	}
	for i, l := range src.Layers {
		v, err := add("lower"+strconv.Itoa(i), l, true, false)
		if err != nil {
			return rootSources{}, nil, err
		}
		out.Layers = append(out.Layers, v)
	}
	for i, m := range src.Mounts {
		// A volume on a filesystem that cannot be idmapped is still
		// bound, with its owners unmapped (nobody inside).
		if m.Source, err = add("volume"+strconv.Itoa(i), m.Source, m.ReadOnly, true); err != nil {
			return rootSources{}, nil, err
		}
		out.Mounts = append(out.Mounts, m)
	}
	return out, planned, nil
}

// viewDir holds the mount points of the idmapped views in the sandbox
// directory.
const viewDir = "view"
