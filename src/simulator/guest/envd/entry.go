package envd

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
)

// entryInfo describes the entry at p, from its lstat info, under its guest
// path: a symlink is reported as one, with its target.
func (g *Guest) entryInfo(p place, info fs.FileInfo) *filesystempb.EntryInfo {
	e := &filesystempb.EntryInfo{
		Name:         path.Base(p.guest()),
		Type:         fileType(info.Mode()),
		Path:         p.guest(),
		Size:         info.Size(),
		Mode:         uint32(info.Mode().Perm()),
		Permissions:  info.Mode().String(),
		ModifiedTime: timestamppb.New(info.ModTime()),
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = names.owner(st.Uid), names.group(st.Gid)
	}
	if e.Type == filesystempb.FileType_FILE_TYPE_SYMLINK {
		if target, err := g.home.root.Readlink(p.rel); err == nil {
			e.SymlinkTarget = &target
		}
	}
	return e
}

func fileType(m fs.FileMode) filesystempb.FileType {
	switch {
	case m&fs.ModeSymlink != 0:
		return filesystempb.FileType_FILE_TYPE_SYMLINK
	case m.IsDir():
		return filesystempb.FileType_FILE_TYPE_DIRECTORY
	case m.IsRegular():
		return filesystempb.FileType_FILE_TYPE_FILE
	default:
		return filesystempb.FileType_FILE_TYPE_UNSPECIFIED
	}
}

// idNames caches uid/gid to name lookups, which read /etc/passwd and
// /etc/group each time; a listing would repeat them per entry.
type idNames struct {
	mu     sync.Mutex
	users  map[uint32]string
	groups map[uint32]string
}

var names = &idNames{users: map[uint32]string{}, groups: map[uint32]string{}}

func (n *idNames) owner(uid uint32) string {
	return n.lookup(n.users, uid, func(id string) (string, error) { return nameInDB("/etc/passwd", id) })
}

func (n *idNames) group(gid uint32) string {
	return n.lookup(n.groups, gid, func(id string) (string, error) { return nameInDB("/etc/group", id) })
}

// nameInDB finds the name of id in an /etc/passwd or /etc/group style
// file ("name:x:id:..."). It reads the file itself rather than through
// os/user: with cgo that goes through the C library's NSS modules, which an
// isolated sandbox would load from its own root filesystem into a process
// built against the host's C library, and crash.
func nameInDB(path, id string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 4)
		if len(f) >= 3 && f[2] == id && f[0] != "" && !strings.HasPrefix(f[0], "#") {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("%s: no entry for %s", path, id)
}

// lookup falls back to the numeric id when the name is unknown.
func (n *idNames) lookup(cache map[uint32]string, id uint32, resolve func(string) (string, error)) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := cache[id]; ok {
		return name
	}
	s := strconv.FormatUint(uint64(id), 10)
	name, err := resolve(s)
	if err != nil {
		name = s
	}
	cache[id] = name
	return name
}
