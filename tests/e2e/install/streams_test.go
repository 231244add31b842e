package install_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
)

// streamLines is how many lines a streamed command prints, one every
// streamEvery: a stream about ten seconds long, so the pods' replacement
// falls inside some of them.
const (
	streamLines = 50
	streamEvery = "0.2"
)

// streamTally counts the long streamed commands of a steady load: started,
// read to their end with every line, and cut by an error (which the SDK
// raises and a caller retries). A stream that ends without an error but
// short of its lines is a failed call: that loss would be silent.
type streamTally struct {
	started, completed, cut atomic.Int64
}

// streams is a worker of the load: on one sandbox of the isolated lane it
// runs, one after another until the load stops, a command that streams
// streamLines numbered lines through sandbox-envd-proxy (envd's Connect
// process.Start, as the SDK's commands.run does), and checks each stream.
func (l *steadyLoad) streams(c *http.Client) {
	created, ok := l.create(c, 900, "streams")
	if !ok {
		return
	}
	defer l.call(c, l.apiRequest(http.MethodDelete, "/sandboxes/"+created.SandboxID, nil), http.StatusNoContent)
	// envd is reached by host name through the proxy, as the SDK does.
	hc := &http.Client{Transport: hostRewrite{host: "49983-" + created.SandboxID + "." + l.domain, next: c.Transport}}
	client := processpbconnect.NewProcessClient(hc, l.proxy)
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		l.stream(client, created.EnvdAccessToken)
	}
}

// stream runs one streamed command and classifies how it ended.
func (l *steadyLoad) stream(client processpbconnect.ProcessClient, token string) {
	l.streamed.started.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script := "for i in $(seq 1 " + strconv.Itoa(streamLines) + "); do echo line-$i; sleep " + streamEvery + "; done"
	req := connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", script}}})
	req.Header().Set("X-Access-Token", token)
	stream, err := client.Start(ctx, req)
	if err != nil {
		l.streamed.cut.Add(1)
		return
	}
	defer stream.Close()
	var out strings.Builder
	exited := false
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			out.Write(d.GetStdout())
		}
		if end := ev.GetEnd(); end != nil {
			exited = end.GetExited() && end.GetExitCode() == 0
		}
	}
	if stream.Err() != nil {
		// An error the caller sees, as the SDK raises it: the command is
		// retried, nothing was lost silently.
		l.streamed.cut.Add(1)
		return
	}
	l.calls.Add(1)
	lines := strings.Count(out.String(), "\n")
	if !exited || lines != streamLines || !strings.Contains(out.String(), "line-"+strconv.Itoa(streamLines)+"\n") {
		l.fail(fmt.Sprintf("a streamed command ended without an error but short: exited %v, %d of %d lines", exited, lines, streamLines))
		return
	}
	l.streamed.completed.Add(1)
}

// hostRewrite sends every request with the Host the proxy routes by.
type hostRewrite struct {
	host string
	next http.RoundTripper
}

func (h hostRewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Host = h.host
	next := h.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(req)
}
