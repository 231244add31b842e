package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
)

// WatchDir streams changes below a directory of the home: a start event
// once the watch is in place, then one event per operation (an inotify
// event may carry several), named relative to the watched directory, and
// keepalives on a quiet stream. A recursive watch follows directories
// created after it started, from the moment their creation is seen.
func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[filesystempb.WatchDirRequest], stream *connect.ServerStream[filesystempb.WatchDirResponse]) error {
	p, err := s.resolve(ctx, req.Msg.GetPath())
	if err != nil {
		return err
	}
	dir, err := s.guest.home.watchableDir(p)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("creating watcher: %w", err))
	}
	defer w.Close()
	recursive := req.Msg.GetRecursive()
	if err := addWatches(w, dir, recursive); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("watching %q: %w", p.guest(), withoutHostPath(err)))
	}
	if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Start{Start: &filesystempb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}

	interval := keepaliveInterval(req.Header())
	var tick <-chan time.Time
	var ticker *time.Ticker
	if interval > 0 {
		ticker = time.NewTicker(interval)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Keepalive{Keepalive: &filesystempb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case err := <-w.Errors:
			return connect.NewError(connect.CodeInternal, fmt.Errorf("watching %q: %w", p.guest(), withoutHostPath(err)))
		case ev, ok := <-w.Events:
			if !ok {
				return connect.NewError(connect.CodeInternal, errors.New("watcher closed"))
			}
			name, err := filepath.Rel(dir, ev.Name)
			if err != nil || name == ".." || strings.HasPrefix(name, "../") {
				continue
			}
			entry := p.child(name)
			if recursive && ev.Has(fsnotify.Create) {
				// Watch the new directory before telling the client, so a
				// client that reacts to the event misses nothing inside it.
				if info, err := s.guest.home.root.Lstat(entry.rel); err == nil && info.IsDir() {
					_ = addWatches(w, ev.Name, true)
				}
			}
			for _, typ := range eventTypes(ev.Op) {
				fe := &filesystempb.FilesystemEvent{Name: name, Type: typ}
				if req.Msg.GetIncludeEntry() {
					if info, err := s.guest.home.root.Lstat(entry.rel); err == nil {
						fe.Entry = s.guest.entryInfo(entry, info)
					}
				}
				if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
					return err
				}
			}
			if ticker != nil {
				ticker.Reset(interval)
			}
		}
	}
}

// watchableDir checks that p is a directory whose real location (after
// symlinks) is inside the home, and returns that location on the host.
// inotify takes host paths, so os.Root cannot do this check for us.
func (h *home) watchableDir(p place) (string, error) {
	info, err := h.root.Stat(p.rel)
	if err != nil {
		return "", rpcError(err)
	}
	if !info.IsDir() {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%q is not a directory", p.guest()))
	}
	dir, err := filepath.EvalSymlinks(h.host(p.rel))
	if err != nil {
		return "", rpcError(fmt.Errorf("resolving %q: %w", p.guest(), withoutHostPath(err)))
	}
	if r, err := filepath.Rel(h.dir, dir); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%q leads outside the sandbox home", p.guest()))
	}
	return dir, nil
}

// withoutHostPath reduces an error from a call that took a host path to its
// errno, so that clients, who see only guest paths, never learn where the
// scratch directory lives on the host. The errno still classifies (not
// found, permission, …).
func withoutHostPath(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return errors.New("operation failed")
}

// addWatches watches dir, and with recursive every directory below it
// (not through symlinks).
func addWatches(w *fsnotify.Watcher, dir string, recursive bool) error {
	if !recursive {
		return w.Add(dir)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // vanished meanwhile
		}
		if !d.IsDir() {
			return nil
		}
		if err := w.Add(p); err != nil && p == dir {
			return fmt.Errorf("watching %q: %w", p, err)
		}
		return nil
	})
}

// eventTypes splits an inotify operation set into envd's event types.
func eventTypes(op fsnotify.Op) []filesystempb.EventType {
	var out []filesystempb.EventType
	for _, m := range []struct {
		op  fsnotify.Op
		typ filesystempb.EventType
	}{
		{fsnotify.Create, filesystempb.EventType_EVENT_TYPE_CREATE},
		{fsnotify.Rename, filesystempb.EventType_EVENT_TYPE_RENAME},
		{fsnotify.Chmod, filesystempb.EventType_EVENT_TYPE_CHMOD},
		{fsnotify.Write, filesystempb.EventType_EVENT_TYPE_WRITE},
		{fsnotify.Remove, filesystempb.EventType_EVENT_TYPE_REMOVE},
	} {
		if op.Has(m.op) {
			out = append(out, m.typ)
		}
	}
	return out
}
