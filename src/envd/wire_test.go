// Package envd_test guards the wire facts of the envd contracts: the e2b
// SDK addresses RPCs as /<package>.<Service>/<Method> and decodes fields by
// number and type, so an innocent-looking edit to a .proto breaks it
// without any compile error. Checked once against the descriptors embedded
// in the e2b JS SDK 2.51; these tests pin the facts most easily broken.
package envd_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb"
	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb/filesystempbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
)

func TestProcedurePaths(t *testing.T) {
	for got, want := range map[string]string{
		processpbconnect.ProcessStartProcedure:               "/process.Process/Start",
		processpbconnect.ProcessConnectProcedure:             "/process.Process/Connect",
		processpbconnect.ProcessSendInputProcedure:           "/process.Process/SendInput",
		processpbconnect.ProcessStreamInputProcedure:         "/process.Process/StreamInput",
		processpbconnect.ProcessCloseStdinProcedure:          "/process.Process/CloseStdin",
		filesystempbconnect.FilesystemListDirProcedure:       "/filesystem.Filesystem/ListDir",
		filesystempbconnect.FilesystemWatchDirProcedure:      "/filesystem.Filesystem/WatchDir",
		filesystempbconnect.FilesystemMakeDirProcedure:       "/filesystem.Filesystem/MakeDir",
		filesystempbconnect.FilesystemCreateWatcherProcedure: "/filesystem.Filesystem/CreateWatcher",
	} {
		if got != want {
			t.Errorf("procedure %q, want %q", got, want)
		}
	}
	if f := processpb.File_process_process_proto.Path(); f != "process/process.proto" {
		t.Errorf("process file registered as %q", f)
	}
	if f := filesystempb.File_filesystem_filesystem_proto.Path(); f != "filesystem/filesystem.proto" {
		t.Errorf("filesystem file registered as %q", f)
	}
}

func field(t *testing.T, md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	t.Helper()
	fd := md.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		t.Fatalf("%s has no field %s", md.FullName(), name)
	}
	return fd
}

func TestFieldNumbersAndKinds(t *testing.T) {
	cases := []struct {
		md     protoreflect.MessageDescriptor
		field  string
		number protoreflect.FieldNumber
		kind   protoreflect.Kind
	}{
		{(&processpb.ProcessEvent_EndEvent{}).ProtoReflect().Descriptor(), "exit_code", 1, protoreflect.Sint32Kind},
		{(&processpb.ProcessEvent_EndEvent{}).ProtoReflect().Descriptor(), "error", 4, protoreflect.StringKind},
		{(&processpb.ProcessEvent{}).ProtoReflect().Descriptor(), "keepalive", 4, protoreflect.MessageKind},
		{(&processpb.StartRequest{}).ProtoReflect().Descriptor(), "stdin", 4, protoreflect.BoolKind},
		{(&processpb.StreamInputRequest_DataEvent{}).ProtoReflect().Descriptor(), "input", 2, protoreflect.MessageKind},
		{(&processpb.ProcessConfig{}).ProtoReflect().Descriptor(), "cwd", 4, protoreflect.StringKind},
		{(&filesystempb.EntryInfo{}).ProtoReflect().Descriptor(), "size", 4, protoreflect.Int64Kind},
		{(&filesystempb.EntryInfo{}).ProtoReflect().Descriptor(), "modified_time", 9, protoreflect.MessageKind},
		{(&filesystempb.EntryInfo{}).ProtoReflect().Descriptor(), "symlink_target", 10, protoreflect.StringKind},
		{(&filesystempb.ListDirRequest{}).ProtoReflect().Descriptor(), "depth", 2, protoreflect.Uint32Kind},
		{(&filesystempb.WatchDirRequest{}).ProtoReflect().Descriptor(), "allow_network_mounts", 4, protoreflect.BoolKind},
	}
	for _, c := range cases {
		fd := field(t, c.md, c.field)
		if fd.Number() != c.number || fd.Kind() != c.kind {
			t.Errorf("%s.%s is #%d %v, want #%d %v", c.md.FullName(), c.field, fd.Number(), fd.Kind(), c.number, c.kind)
		}
	}
	for _, opt := range []protoreflect.FieldDescriptor{
		field(t, (&processpb.StartRequest{}).ProtoReflect().Descriptor(), "stdin"),
		field(t, (&processpb.ProcessConfig{}).ProtoReflect().Descriptor(), "cwd"),
		field(t, (&filesystempb.EntryInfo{}).ProtoReflect().Descriptor(), "symlink_target"),
	} {
		if !opt.HasPresence() {
			t.Errorf("%s must be proto3 optional (presence is meaningful)", opt.FullName())
		}
	}
	if processpb.Signal_SIGNAL_SIGKILL != 9 || processpb.Signal_SIGNAL_SIGTERM != 15 {
		t.Errorf("signal numbers changed")
	}
	if filesystempb.FileType_FILE_TYPE_SYMLINK != 3 || filesystempb.EventType_EVENT_TYPE_CHMOD != 5 {
		t.Errorf("enum numbers changed")
	}
}
