package envd

import (
	"net/http"
	"os"
	"path"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
)

func TestFilesystemRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			fs := f.filesystem(w)
			ctx := testContext(t)
			base := w.name

			// A file uploaded through /files shows up in the RPCs.
			body, ct := multipartBody(t, [][2]string{{"x", "twelve bytes"}})
			if status, resp, _ := do(t, f.client(w.h2c, testToken), http.MethodPost, f.filesURL(base+"/file.txt", nil), ct, body, nil); status != http.StatusOK {
				t.Fatalf("upload: %d %s", status, resp)
			}

			mk, err := fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: base + "/dir/sub"}))
			if err != nil {
				t.Fatalf("MakeDir: %v", err)
			}
			if e := mk.Msg.GetEntry(); e.GetType() != filesystempb.FileType_FILE_TYPE_DIRECTORY || e.GetPath() != path.Join("/home/user", base, "dir/sub") {
				t.Fatalf("MakeDir entry = %v", e)
			}
			_, err = fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: base + "/dir/sub"}))
			wantCode(t, err, connect.CodeAlreadyExists)
			_, err = fs.MakeDir(ctx, connect.NewRequest(&filesystempb.MakeDirRequest{Path: base + "/file.txt"}))
			wantCode(t, err, connect.CodeInvalidArgument)

			st, err := fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: base + "/file.txt"}))
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			e := st.Msg.GetEntry()
			if e.GetName() != "file.txt" || e.GetType() != filesystempb.FileType_FILE_TYPE_FILE || e.GetSize() != 12 ||
				e.GetPath() != path.Join("/home/user", base, "file.txt") || e.GetPermissions() != "-rw-r--r--" ||
				e.GetMode() != 0o644 || e.GetOwner() == "" || e.GetModifiedTime() == nil {
				t.Fatalf("Stat entry = %v", e)
			}

			list := func(depth uint32) map[string]filesystempb.FileType {
				t.Helper()
				res, err := fs.ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: base, Depth: depth}))
				if err != nil {
					t.Fatalf("ListDir depth %d: %v", depth, err)
				}
				got := map[string]filesystempb.FileType{}
				for _, e := range res.Msg.GetEntries() {
					rel, _ := filepath.Rel(path.Join("/home/user", base), e.GetPath())
					got[rel] = e.GetType()
				}
				return got
			}
			if got := list(0); len(got) != 2 || got["file.txt"] != filesystempb.FileType_FILE_TYPE_FILE || got["dir"] != filesystempb.FileType_FILE_TYPE_DIRECTORY {
				t.Fatalf("ListDir depth 1 = %v", got)
			}
			if got := list(2); len(got) != 3 || got["dir/sub"] != filesystempb.FileType_FILE_TYPE_DIRECTORY {
				t.Fatalf("ListDir depth 2 = %v", got)
			}
			_, err = fs.ListDir(ctx, connect.NewRequest(&filesystempb.ListDirRequest{Path: base + "/file.txt"}))
			wantCode(t, err, connect.CodeInvalidArgument)

			mv, err := fs.Move(ctx, connect.NewRequest(&filesystempb.MoveRequest{Source: base + "/file.txt", Destination: base + "/dir/new/moved.txt"}))
			if err != nil {
				t.Fatalf("Move: %v", err)
			}
			if mv.Msg.GetEntry().GetPath() != path.Join("/home/user", base, "dir/new/moved.txt") {
				t.Fatalf("Move entry = %v", mv.Msg.GetEntry())
			}
			_, err = fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: base + "/file.txt"}))
			wantCode(t, err, connect.CodeNotFound)
			if b, _ := os.ReadFile(filepath.Join(f.root, base, "dir/new/moved.txt")); string(b) != "twelve bytes" {
				t.Fatalf("moved file holds %q", b)
			}

			if _, err := fs.Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: base + "/dir"})); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			_, err = fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: base + "/dir"}))
			wantCode(t, err, connect.CodeNotFound)
			_, err = fs.Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: base + "/dir"}))
			wantCode(t, err, connect.CodeNotFound)
			_, err = fs.Remove(ctx, connect.NewRequest(&filesystempb.RemoveRequest{Path: ""}))
			wantCode(t, err, connect.CodeInvalidArgument)
		})
	}
}

func TestSymlinksAreReportedNotFollowedOut(t *testing.T) {
	f := newFixture(t, nil)
	fs := f.filesystem(wires[0])
	ctx := testContext(t)
	if err := os.WriteFile(filepath.Join(f.root, "target.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target.txt", filepath.Join(f.root, "link")); err != nil {
		t.Fatal(err)
	}
	st, err := fs.Stat(ctx, connect.NewRequest(&filesystempb.StatRequest{Path: "link"}))
	if err != nil {
		t.Fatal(err)
	}
	if st.Msg.GetEntry().GetType() != filesystempb.FileType_FILE_TYPE_SYMLINK || st.Msg.GetEntry().GetSymlinkTarget() != "target.txt" {
		t.Fatalf("Stat of a symlink = %v", st.Msg.GetEntry())
	}
}

func TestWatchDir(t *testing.T) {
	f := newFixture(t, nil)
	fs := f.filesystem(wires[0])
	ctx := testContext(t)
	if err := os.Mkdir(filepath.Join(f.root, "watched"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := fs.WatchDir(ctx, connect.NewRequest(&filesystempb.WatchDirRequest{Path: "watched", Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("first watch event is not the start event: %v %v", s.Msg(), s.Err())
	}
	// waitFor reads events until one matches name and type.
	waitFor := func(name string, typ filesystempb.EventType) *filesystempb.FilesystemEvent {
		t.Helper()
		for s.Receive() {
			if ev := s.Msg().GetFilesystem(); ev != nil && ev.GetName() == name && ev.GetType() == typ {
				return ev
			}
		}
		t.Fatalf("watch ended before %v of %q: %v", typ, name, s.Err())
		return nil
	}

	if err := os.WriteFile(filepath.Join(f.root, "watched/a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := waitFor("a.txt", filesystempb.EventType_EVENT_TYPE_CREATE)
	if ev.GetEntry().GetPath() != "/home/user/watched/a.txt" {
		t.Errorf("event entry = %v", ev.GetEntry())
	}
	if err := os.Mkdir(filepath.Join(f.root, "watched/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor("sub", filesystempb.EventType_EVENT_TYPE_CREATE)
	// The new directory is watched by the time its creation is reported.
	if err := os.WriteFile(filepath.Join(f.root, "watched/sub/b.txt"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("sub/b.txt", filesystempb.EventType_EVENT_TYPE_CREATE)
	if err := os.Remove(filepath.Join(f.root, "watched/a.txt")); err != nil {
		t.Fatal(err)
	}
	waitFor("a.txt", filesystempb.EventType_EVENT_TYPE_REMOVE)

	_, err = fs.CreateWatcher(ctx, connect.NewRequest(&filesystempb.CreateWatcherRequest{Path: "watched"}))
	wantCode(t, err, connect.CodeUnimplemented)
}

func TestWatchDirRefusesOutside(t *testing.T) {
	f := newFixture(t, nil)
	fs := f.filesystem(wires[0])
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(f.root, "out")); err != nil {
		t.Fatal(err)
	}
	for path, code := range map[string]connect.Code{"..": connect.CodeInvalidArgument, "out": connect.CodePermissionDenied, "missing": connect.CodeNotFound} {
		s, err := fs.WatchDir(testContext(t), connect.NewRequest(&filesystempb.WatchDirRequest{Path: path}))
		if err == nil {
			s.Receive()
			err = s.Err()
			s.Close()
		}
		wantCode(t, err, code)
	}
}
