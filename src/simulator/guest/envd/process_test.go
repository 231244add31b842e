package envd

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestStartStreamsOutputAndExitCode(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Envs = map[string]string{"SANDBOX_WIDE": "from-config"} })
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			c := f.process(w)

			o := run(t, c, &processpb.StartRequest{Process: bashCommand("echo hello")})
			if got := o.stdout.String(); got != "hello\n" {
				t.Errorf("stdout = %q, want %q", got, "hello\n")
			}
			if o.end.GetExitCode() != 0 || !o.end.GetExited() || o.end.Error != nil {
				t.Errorf("end = %v, want a clean exit 0", o.end)
			}

			o = run(t, c, &processpb.StartRequest{Process: bashCommand("echo oops >&2; exit 3")})
			if got := o.stderr.String(); got != "oops\n" {
				t.Errorf("stderr = %q, want %q", got, "oops\n")
			}
			if o.end.GetExitCode() != 3 || !o.end.GetExited() || o.end.GetStatus() != "exit status 3" || o.end.GetError() != "exit status 3" {
				t.Errorf("end = %v, want exit status 3", o.end)
			}
		})
	}

	t.Run("cwd and environment", func(t *testing.T) {
		if err := os.Mkdir(f.root+"/sub", 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := bashCommand(`printf '%s|%s|%s|%s|%s' "$PWD" "$HOME" "$USER" "$SANDBOX_WIDE" "$FROM_REQUEST"`)
		cfg.Cwd = new("sub")
		cfg.Envs = map[string]string{"FROM_REQUEST": "yes"}
		o := run(t, f.process(wires[0]), &processpb.StartRequest{Process: cfg})
		want := f.root + "/sub|" + f.root + "|user|from-config|yes"
		if got := o.stdout.String(); got != want {
			t.Errorf("stdout = %q, want %q", got, want)
		}
	})

	t.Run("bad cwd and missing binary", func(t *testing.T) {
		c := f.process(wires[0])
		cfg := bashCommand("true")
		cfg.Cwd = new("does-not-exist")
		s, err := c.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{Process: cfg}))
		if err == nil {
			s.Receive()
			err = s.Err()
			s.Close()
		}
		wantCode(t, err, connect.CodeInvalidArgument)

		s, err = c.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/nonexistent/binary"}}))
		if err == nil {
			s.Receive()
			err = s.Err()
			s.Close()
		}
		wantCode(t, err, connect.CodeInvalidArgument)
	})
}

func TestStdinThroughSendInputAndCloseStdin(t *testing.T) {
	f := newFixture(t, nil)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			c := f.process(w)
			ctx := testContext(t)
			s, err := c.Start(ctx, connect.NewRequest(&processpb.StartRequest{
				Process: bashCommand("read line; echo got:$line; cat"),
				Stdin:   new(true),
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			pid := readStart(t, s)
			sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
			for _, chunk := range []string{"ping\n", "tail"} {
				if _, err := c.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{
					Process: sel,
					Input:   &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte(chunk)}},
				})); err != nil {
					t.Fatalf("SendInput: %v", err)
				}
			}
			if _, err := c.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel})); err != nil {
				t.Fatalf("CloseStdin: %v", err)
			}
			o := &outcome{pid: pid}
			drain(t, s, o)
			if got := o.stdout.String(); got != "got:ping\ntail" {
				t.Errorf("stdout = %q", got)
			}
			if o.end.GetExitCode() != 0 {
				t.Errorf("end = %v", o.end)
			}
		})
	}

	t.Run("stdin disabled", func(t *testing.T) {
		c := f.process(wires[0])
		ctx := testContext(t)
		// Without stdin the command reads /dev/null and ends at once.
		o := run(t, c, &processpb.StartRequest{Process: bashCommand("cat; echo done"), Stdin: new(false)})
		if o.stdout.String() != "done\n" {
			t.Errorf("stdout = %q", o.stdout.String())
		}
		_, err := c.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{
			Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: o.pid}},
			Input:   &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("x")}},
		}))
		wantCode(t, err, connect.CodeNotFound)
	})
}

func TestStreamInputInOrder(t *testing.T) {
	f := newFixture(t, nil)
	w := wires[1] // client streaming needs HTTP/2
	c := f.process(w)
	ctx := testContext(t)
	s, err := c.Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: bashCommand("cat"), Stdin: new(true), Tag: new("catter")}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := readStart(t, s)

	in := c.StreamInput(ctx)
	send := func(r *processpb.StreamInputRequest) {
		if err := in.Send(r); err != nil {
			t.Fatalf("StreamInput send: %v", err)
		}
	}
	send(&processpb.StreamInputRequest{Event: &processpb.StreamInputRequest_Start{Start: &processpb.StreamInputRequest_StartEvent{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: "catter"}},
	}}})
	for i := range 20 {
		send(&processpb.StreamInputRequest{Event: &processpb.StreamInputRequest_Data{Data: &processpb.StreamInputRequest_DataEvent{
			Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte(strconv.Itoa(i) + ",")}},
		}}})
	}
	send(&processpb.StreamInputRequest{Event: &processpb.StreamInputRequest_Keepalive{Keepalive: &processpb.StreamInputRequest_KeepAlive{}}})
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatalf("StreamInput: %v", err)
	}
	if _, err := c.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}},
	})); err != nil {
		t.Fatal(err)
	}
	o := &outcome{pid: pid}
	drain(t, s, o)
	var want strings.Builder
	for i := range 20 {
		want.WriteString(strconv.Itoa(i) + ",")
	}
	if o.stdout.String() != want.String() {
		t.Errorf("stdout = %q, want %q", o.stdout.String(), want.String())
	}
}

// procState returns a host process's state letter from /proc, "" if gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// gone reports whether pid has exited (absent, or a zombie nobody reaped).
func gone(pid int) bool {
	st := procState(pid)
	return st == "" || st == "Z" || st == "X"
}

// startWithChild starts a shell that backgrounds a long sleep and reports
// its pid, and returns the stream, the shell's pid and the child's pid.
func startWithChild(t *testing.T, c processpbconnect.ProcessClient) (*connect.ServerStreamForClient[processpb.StartResponse], uint32, int) {
	t.Helper()
	s, err := c.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{Process: bashCommand("sleep 600 & echo $!; wait")}))
	if err != nil {
		t.Fatal(err)
	}
	pid := readStart(t, s)
	var out strings.Builder
	for !strings.Contains(out.String(), "\n") {
		if !s.Receive() {
			t.Fatalf("stream ended early: %v", s.Err())
		}
		out.Write(eventOf(s).GetData().GetStdout())
	}
	child, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("child pid %q: %v", out.String(), err)
	}
	return s, pid, child
}

func TestSendSignalKillsTheProcessGroup(t *testing.T) {
	f := newFixture(t, nil)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			c := f.process(w)
			s, pid, child := startWithChild(t, c)
			defer s.Close()

			list, err := c.List(testContext(t), connect.NewRequest(&processpb.ListRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Msg.GetProcesses()) != 1 || list.Msg.GetProcesses()[0].GetPid() != pid ||
				list.Msg.GetProcesses()[0].GetConfig().GetCmd() != "/bin/bash" {
				t.Fatalf("List = %v, want just pid %d", list.Msg, pid)
			}

			if _, err := c.SendSignal(testContext(t), connect.NewRequest(&processpb.SendSignalRequest{
				Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}},
				Signal:  processpb.Signal_SIGNAL_SIGKILL,
			})); err != nil {
				t.Fatalf("SendSignal: %v", err)
			}
			o := &outcome{pid: pid}
			drain(t, s, o)
			if o.end.GetExited() || o.end.GetExitCode() != -1 || o.end.GetStatus() != "signal: killed" {
				t.Errorf("end = %v, want killed by a signal", o.end)
			}
			poll.Until(t, "the backgrounded child to die with its group", func() bool { return gone(child) })

			// Gone from the table: further signals find nothing.
			_, err = c.SendSignal(testContext(t), connect.NewRequest(&processpb.SendSignalRequest{
				Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}},
				Signal:  processpb.Signal_SIGNAL_SIGKILL,
			}))
			wantCode(t, err, connect.CodeNotFound)
		})
	}
}

func TestCloseKillsEverything(t *testing.T) {
	f := newFixture(t, nil)
	c := f.process(wires[0])
	s, pid, child := startWithChild(t, c)
	defer s.Close()

	if err := f.guest.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close waited for the shell to be reaped; the backgrounded child got
	// the same SIGKILL through the group but is not ours to reap.
	if !gone(int(pid)) {
		t.Errorf("after Close: shell %d still in state %q", pid, procState(int(pid)))
	}
	poll.Until(t, "the backgrounded child to die with its group", func() bool { return gone(child) })
	// The stream ends once the process is gone.
	for s.Receive() {
	}
	_, err := c.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{Process: bashCommand("true")}))
	if err == nil {
		s2, _ := c.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{Process: bashCommand("true")}))
		s2.Receive()
		err = s2.Err()
		s2.Close()
	}
	if err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func TestCloseKillsBackgroundJobsOfEndedCommands(t *testing.T) {
	f := newFixture(t, nil)
	c := f.process(wires[0])
	o := run(t, c, &processpb.StartRequest{Process: bashCommand("sleep 300 >/dev/null 2>&1 & echo $!")})
	child, err := strconv.Atoi(strings.TrimSpace(o.stdout.String()))
	if err != nil || o.end.GetExitCode() != 0 {
		t.Fatalf("background job pid %q, end %v: %v", o.stdout.String(), o.end, err)
	}
	// The shell has ended and left the table; its job lives on.
	poll.Until(t, "the shell to leave the process table", func() bool {
		list, err := c.List(testContext(t), connect.NewRequest(&processpb.ListRequest{}))
		return err == nil && len(list.Msg.GetProcesses()) == 0
	})
	if gone(child) {
		t.Fatalf("background job %d died with its shell", child)
	}
	if err := f.guest.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	poll.Until(t, "the background job to die with the guest", func() bool { return gone(child) })
}

func TestConnectAttachesToRunningProcess(t *testing.T) {
	f := newFixture(t, nil)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			c := f.process(w)
			ctx := testContext(t)
			tag := "job-" + w.name
			s, err := c.Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: bashCommand("cat"), Stdin: new(true), Tag: &tag}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			pid := readStart(t, s)

			cs, err := c.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{
				Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: tag}},
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := readStart(t, cs); got != pid {
				t.Fatalf("Connect start pid = %d, want %d", got, pid)
			}
			sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
			if _, err := c.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{
				Process: sel, Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("shared")}},
			})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{Process: sel})); err != nil {
				t.Fatal(err)
			}
			for _, st := range []eventStream{s, cs} {
				o := &outcome{}
				drain(t, st, o)
				if o.stdout.String() != "shared" || o.end.GetExitCode() != 0 {
					t.Errorf("stream saw stdout %q, end %v", o.stdout.String(), o.end)
				}
			}

			_, err = c.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: sel}))
			if err == nil {
				cs2, _ := c.Connect(ctx, connect.NewRequest(&processpb.ConnectRequest{Process: sel}))
				cs2.Receive()
				err = cs2.Err()
				cs2.Close()
			}
			wantCode(t, err, connect.CodeNotFound)
		})
	}
}

func TestPTY(t *testing.T) {
	f := newFixture(t, nil)
	c := f.process(wires[0])
	ctx := testContext(t)
	s, err := c.Start(ctx, connect.NewRequest(&processpb.StartRequest{
		Process: bashCommand("read -r line; stty size; echo line=$line"),
		Pty:     &processpb.PTY{Size: &processpb.PTY_Size{Cols: 80, Rows: 24}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := readStart(t, s)
	sel := &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}}
	if _, err := c.Update(ctx, connect.NewRequest(&processpb.UpdateRequest{
		Process: sel, Pty: &processpb.PTY{Size: &processpb.PTY_Size{Cols: 132, Rows: 43}},
	})); err != nil {
		t.Fatalf("Update: %v", err)
	}
	// stdin is not how a pty process takes input.
	_, err = c.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{
		Process: sel, Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: []byte("x")}},
	}))
	wantCode(t, err, connect.CodeFailedPrecondition)
	if _, err := c.SendInput(ctx, connect.NewRequest(&processpb.SendInputRequest{
		Process: sel, Input: &processpb.ProcessInput{Input: &processpb.ProcessInput_Pty{Pty: []byte("typed\n")}},
	})); err != nil {
		t.Fatalf("SendInput pty: %v", err)
	}
	o := &outcome{pid: pid}
	drain(t, s, o)
	out := o.pty.String()
	if !strings.Contains(out, "43 132") || !strings.Contains(out, "line=typed") {
		t.Errorf("pty output %q lacks the resized size or the typed line", out)
	}
	if o.stdout.Len() != 0 || o.end.GetExitCode() != 0 {
		t.Errorf("stdout %q, end %v", o.stdout.String(), o.end)
	}
}

func TestKeepaliveOnQuietStream(t *testing.T) {
	f := newFixture(t, nil)
	c := f.process(wires[0])
	ctx := testContext(t)
	req := connect.NewRequest(&processpb.StartRequest{Process: bashCommand("cat"), Stdin: new(true)})
	req.Header().Set("Keepalive-Ping-Interval", "1")
	s, err := c.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := readStart(t, s)
	// cat is silent until it gets input; the stream must still carry
	// keepalives meanwhile.
	if !s.Receive() || eventOf(s).GetKeepalive() == nil {
		t.Fatalf("expected a keepalive on the idle stream, got %v (%v)", eventOf(s), s.Err())
	}
	if _, err := c.CloseStdin(ctx, connect.NewRequest(&processpb.CloseStdinRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: pid}},
	})); err != nil {
		t.Fatal(err)
	}
	drain(t, s, &outcome{})
}

func TestClientTimeoutEndsTheProcess(t *testing.T) {
	f := newFixture(t, nil)
	c := f.process(wires[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.Start(ctx, connect.NewRequest(&processpb.StartRequest{Process: bashCommand("sleep 600")}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := readStart(t, s)
	for s.Receive() {
	}
	// The client's deadline is the command's lifetime (Connect-Timeout-Ms).
	poll.Until(t, "the timed-out process to be killed", func() bool { return gone(int(pid)) })
	poll.Until(t, "the process to leave the table", func() bool {
		l, err := c.List(testContext(t), connect.NewRequest(&processpb.ListRequest{}))
		return err == nil && len(l.Msg.GetProcesses()) == 0
	})
}

func TestOversizedRPCMessageIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	c := f.process(wires[1])
	_, err := c.SendInput(testContext(t), connect.NewRequest(&processpb.SendInputRequest{
		Process: &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: 1}},
		Input:   &processpb.ProcessInput{Input: &processpb.ProcessInput_Stdin{Stdin: make([]byte, maxRPCMessageBytes+1)}},
	}))
	wantCode(t, err, connect.CodeResourceExhausted)
}
