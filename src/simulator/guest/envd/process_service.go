package envd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
)

// keepaliveHeader carries, in seconds, how often the client wants a
// keepalive event on an otherwise quiet stream.
const keepaliveHeader = "Keepalive-Ping-Interval"

// processService implements the process RPCs over the guest's table.
type processService struct {
	guest *Guest
}

var _ processpbconnect.ProcessHandler = (*processService)(nil)

func (s *processService) Start(ctx context.Context, req *connect.Request[processpb.StartRequest], stream *connect.ServerStream[processpb.StartResponse]) error {
	spawn, err := s.spawnRequest(userFrom(ctx), req.Msg, req.Header())
	if err != nil {
		return err
	}
	p, sub, err := s.guest.procs.start(spawn)
	if err != nil {
		if errors.Is(err, errGuestClosed) {
			return connect.NewError(connect.CodeUnavailable, err)
		}
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	send := func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.StartResponse{Event: ev})
	}
	return streamProcess(ctx, p, sub, keepaliveInterval(req.Header()), send)
}

func (s *processService) Connect(ctx context.Context, req *connect.Request[processpb.ConnectRequest], stream *connect.ServerStream[processpb.ConnectResponse]) error {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	send := func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.ConnectResponse{Event: ev})
	}
	return streamProcess(ctx, p, p.subscribe(), keepaliveInterval(req.Header()), send)
}

func (s *processService) List(context.Context, *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error) {
	procs := s.guest.procs.list()
	out := &processpb.ListResponse{Processes: make([]*processpb.ProcessInfo, 0, len(procs))}
	for _, p := range procs {
		out.Processes = append(out.Processes, p.info())
	}
	return connect.NewResponse(out), nil
}

func (s *processService) Update(_ context.Context, req *connect.Request[processpb.UpdateRequest]) (*connect.Response[processpb.UpdateResponse], error) {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if size := req.Msg.GetPty().GetSize(); size != nil {
		if err := p.resize(size); err != nil {
			return nil, inputError(err)
		}
	}
	return connect.NewResponse(&processpb.UpdateResponse{}), nil
}

func (s *processService) SendInput(_ context.Context, req *connect.Request[processpb.SendInputRequest]) (*connect.Response[processpb.SendInputResponse], error) {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := writeInput(p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.SendInputResponse{}), nil
}

// StreamInput takes a start message naming the process, then data in
// order; keepalives are ignored.
func (s *processService) StreamInput(_ context.Context, stream *connect.ClientStream[processpb.StreamInputRequest]) (*connect.Response[processpb.StreamInputResponse], error) {
	var p *process
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *processpb.StreamInputRequest_Start:
			found, err := s.find(ev.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = found
		case *processpb.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("input sent before the start message"))
			}
			if err := writeInput(p, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.StreamInputResponse{}), nil
}

func (s *processService) SendSignal(_ context.Context, req *connect.Request[processpb.SendSignalRequest]) (*connect.Response[processpb.SendSignalResponse], error) {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case processpb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case processpb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unsupported signal %v", req.Msg.GetSignal()))
	}
	if err := p.signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&processpb.SendSignalResponse{}), nil
}

func (s *processService) CloseStdin(_ context.Context, req *connect.Request[processpb.CloseStdinRequest]) (*connect.Response[processpb.CloseStdinResponse], error) {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.closeStdin(); err != nil {
		return nil, inputError(err)
	}
	return connect.NewResponse(&processpb.CloseStdinResponse{}), nil
}

func (s *processService) find(sel *processpb.ProcessSelector) (*process, error) {
	p, err := s.guest.procs.find(sel)
	switch {
	case errors.Is(err, errProcessNotFound):
		return nil, connect.NewError(connect.CodeNotFound, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return p, nil
}

// spawnRequest validates a StartRequest into what startProcess runs: the
// working directory inside the home, and envd's environment (PATH from the
// daemon, HOME/USER/LOGNAME for the user, sandbox envs, then the request's
// own, later ones winning).
func (s *processService) spawnRequest(user string, msg *processpb.StartRequest, header http.Header) (spawnRequest, error) {
	cfg := msg.GetProcess()
	if cfg.GetCmd() == "" {
		return spawnRequest{}, connect.NewError(connect.CodeInvalidArgument, errors.New("no command given"))
	}
	h := s.guest.home
	cwd, err := h.resolve(user, cfg.GetCwd())
	if err != nil {
		return spawnRequest{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %s: %w", quotePath(cfg.GetCwd()), err))
	}
	st, err := h.root.Stat(cwd.rel)
	if err != nil {
		return spawnRequest{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %q does not exist", cwd.guest()))
	}
	if !st.IsDir() {
		return spawnRequest{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd %q is not a directory", cwd.guest()))
	}
	timeout, err := processTimeout(header)
	if err != nil {
		return spawnRequest{}, connect.NewError(connect.CodeInvalidArgument, err)
	}

	// Unisolated, HOME is the scratch directory (the guest-side name exists
	// only in the file API); on a machine the guest owns, the home is real.
	homeDir, pathVar := h.dir, os.Getenv("PATH")
	if m := s.guest.cfg.Machine; m != nil {
		homeDir = guestHome(user)
		if m.Path != "" {
			pathVar = m.Path
		}
	}
	env := []string{"PATH=" + pathVar, "HOME=" + homeDir, "USER=" + user, "LOGNAME=" + user}
	env = appendSorted(env, s.guest.sandboxEnvs())
	env = appendSorted(env, cfg.GetEnvs())
	// A command is a host process: it runs in the host directory the guest
	// path names (unisolated, the os.Root check above kept it inside the
	// home), as the user's account when the guest owns its machine.
	return spawnRequest{
		config:  cfg,
		tag:     msg.Tag,
		pty:     msg.GetPty(),
		stdin:   msg.Stdin == nil || msg.GetStdin(),
		dir:     h.host(cwd.rel),
		env:     env,
		cred:    h.credential(user),
		timeout: timeout,
	}, nil
}

// appendSorted appends vars as KEY=value in key order, for a stable env.
func appendSorted(env []string, vars map[string]string) []string {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// processTimeout reads Connect-Timeout-Ms: as in envd, the deadline the
// client set for the Start stream is also the command's lifetime, after
// which its group is killed. No header means no limit.
func processTimeout(h http.Header) (time.Duration, error) {
	v := h.Get("Connect-Timeout-Ms")
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("invalid Connect-Timeout-Ms %q", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// keepaliveInterval reads the client's keepalive wish; 0 means none.
func keepaliveInterval(h http.Header) time.Duration {
	secs, err := strconv.Atoi(h.Get(keepaliveHeader))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}

// streamProcess sends the start event, then the process's events as they
// come, with a keepalive whenever the stream was quiet for interval. It
// returns after the end event, or when the client goes away, which detaches
// the stream but leaves the process running.
func streamProcess(ctx context.Context, p *process, sub *subscription, interval time.Duration, send func(*processpb.ProcessEvent) error) error {
	defer p.unsubscribe(sub)
	start := &processpb.ProcessEvent{Event: &processpb.ProcessEvent_Start{Start: &processpb.ProcessEvent_StartEvent{Pid: p.pid}}}
	if err := send(start); err != nil {
		return err
	}
	var tick <-chan time.Time
	var ticker *time.Ticker
	if interval > 0 {
		ticker = time.NewTicker(interval)
		defer ticker.Stop()
		tick = ticker.C
	}
	keepalive := &processpb.ProcessEvent{Event: &processpb.ProcessEvent_Keepalive{Keepalive: &processpb.ProcessEvent_KeepAlive{}}}
	for {
		select {
		case ev, ok := <-sub.events:
			if !ok {
				return nil
			}
			if err := send(ev); err != nil {
				return err
			}
			if ticker != nil {
				ticker.Reset(interval)
			}
		case <-tick:
			if err := send(keepalive); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// writeInput routes one ProcessInput to stdin or the pty.
func writeInput(p *process, in *processpb.ProcessInput) error {
	var err error
	switch v := in.GetInput().(type) {
	case *processpb.ProcessInput_Stdin:
		err = p.writeStdin(v.Stdin)
	case *processpb.ProcessInput_Pty:
		err = p.writePTY(v.Pty)
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("no input given"))
	}
	if err != nil {
		return inputError(err)
	}
	return nil
}

// inputError maps input and pty errors: asking for something the process
// does not have is a failed precondition, anything else internal.
func inputError(err error) error {
	switch {
	case errors.Is(err, errNoStdin), errors.Is(err, errHasTTY), errors.Is(err, errHasNoTTY), errors.Is(err, errProcessDone):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	default:
		return connect.NewError(connect.CodeInternal, err)
	}
}
