package envd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb/filesystempbconnect"
)

// maxListEntries bounds one ListDir answer, so a deep listing of a large
// tree cannot build an unbounded response.
const maxListEntries = 100_000

// filesystemService implements the filesystem RPCs inside the home.
//
// WatchDir is in watch.go. The polling watcher trio (CreateWatcher,
// GetWatcherEvents, RemoveWatcher), which the JS SDK does not use, is not
// implemented: the embedded handler answers it with Unimplemented.
type filesystemService struct {
	filesystempbconnect.UnimplementedFilesystemHandler
	guest *Guest
}

var _ filesystempbconnect.FilesystemHandler = (*filesystemService)(nil)

func (s *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystempb.StatRequest]) (*connect.Response[filesystempb.StatResponse], error) {
	p, err := s.resolve(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	info, err := s.guest.home.root.Lstat(p.rel)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystempb.StatResponse{Entry: s.guest.entryInfo(p, info)}), nil
}

// MakeDir creates the directory and any missing parents. An existing
// directory is AlreadyExists (the SDK's "false"); an existing file is
// InvalidArgument.
func (s *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystempb.MakeDirRequest]) (*connect.Response[filesystempb.MakeDirResponse], error) {
	p, err := s.resolve(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	root := s.guest.home.root
	if info, err := root.Stat(p.rel); err == nil {
		if info.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %q already exists", p.guest()))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%q exists and is not a directory", p.guest()))
	}
	if err := s.guest.home.mkdirAll(userFrom(ctx), p.rel); err != nil {
		return nil, rpcError(err)
	}
	info, err := root.Lstat(p.rel)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystempb.MakeDirResponse{Entry: s.guest.entryInfo(p, info)}), nil
}

// Move renames source to destination, creating the destination's parents.
func (s *filesystemService) Move(ctx context.Context, req *connect.Request[filesystempb.MoveRequest]) (*connect.Response[filesystempb.MoveResponse], error) {
	src, err := s.resolve(ctx, req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := s.resolve(ctx, req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	if src.rel == "." || dst.rel == "." {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the home directory itself cannot be moved or replaced"))
	}
	root := s.guest.home.root
	if _, err := root.Lstat(src.rel); err != nil {
		return nil, rpcError(err)
	}
	if err := s.guest.home.mkdirAll(userFrom(ctx), filepath.Dir(dst.rel)); err != nil {
		return nil, rpcError(err)
	}
	if err := root.Rename(src.rel, dst.rel); err != nil {
		return nil, rpcError(err)
	}
	info, err := root.Lstat(dst.rel)
	if err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystempb.MoveResponse{Entry: s.guest.entryInfo(dst, info)}), nil
}

// ListDir lists a directory's entries down to depth levels (0 means 1),
// sorted by path, without following symlinks below the listed directory.
func (s *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystempb.ListDirRequest]) (*connect.Response[filesystempb.ListDirResponse], error) {
	p, err := s.resolve(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	// The listed directory itself may be reached through a symlink; the
	// root keeps that symlink inside the home.
	info, err := s.guest.home.root.Stat(p.rel)
	if err != nil {
		return nil, rpcError(err)
	}
	if !info.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%q is not a directory", p.guest()))
	}
	var entries []*filesystempb.EntryInfo
	if err := s.walk(p, depth, &entries); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystempb.ListDirResponse{Entries: entries}), nil
}

func (s *filesystemService) walk(dir place, depth int, out *[]*filesystempb.EntryInfo) error {
	f, err := s.guest.home.root.Open(dir.rel)
	if err != nil {
		return rpcError(err)
	}
	dirents, err := f.ReadDir(-1)
	_ = f.Close()
	if err != nil {
		return rpcError(err)
	}
	sort.Slice(dirents, func(i, j int) bool { return dirents[i].Name() < dirents[j].Name() })
	for _, d := range dirents {
		p := dir.child(d.Name())
		info, err := d.Info()
		if err != nil {
			continue // removed while listing
		}
		if len(*out) >= maxListEntries {
			return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("listing has more than %d entries", maxListEntries))
		}
		*out = append(*out, s.guest.entryInfo(p, info))
		if d.IsDir() && depth > 1 {
			if err := s.walk(p, depth-1, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove deletes a file, a symlink (not its target) or a whole directory.
func (s *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystempb.RemoveRequest]) (*connect.Response[filesystempb.RemoveResponse], error) {
	p, err := s.resolve(ctx, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if p.rel == "." {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the home directory itself cannot be removed"))
	}
	root := s.guest.home.root
	if _, err := root.Lstat(p.rel); err != nil {
		return nil, rpcError(err)
	}
	if err := root.RemoveAll(p.rel); err != nil {
		return nil, rpcError(err)
	}
	return connect.NewResponse(&filesystempb.RemoveResponse{}), nil
}

// resolve maps a request path, as the RPC's user names it, to a place in
// the home, refusing ones outside it.
func (s *filesystemService) resolve(ctx context.Context, p string) (place, error) {
	pl, err := s.guest.home.resolve(userFrom(ctx), p)
	if err != nil {
		return place{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s: %w", quotePath(p), err))
	}
	return pl, nil
}
