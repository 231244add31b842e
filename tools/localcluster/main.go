// Command localcluster is the Kubernetes path's one command: a real
// single-node cluster built from source (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, a kubelet on containerd, and
// kube-proxy), with the packaged chart installed by the build's helm,
// simulated sandboxd nodes, the example warm pool filled and the e2b
// surface on.
//
//	tools/bazel run //tools/localcluster
//
// The cluster lives in network and mount namespaces of its own, so it
// touches nothing of the machine's network; this process stays outside and
// forwards three loopback ports into it: the kube-apiserver, the e2b API
// and the envd data plane. It prints the export lines for kubectl and the
// e2b SDK, then "# ready", and runs until Ctrl-C, when it tears everything
// down: processes, mounts, interfaces and iptables rules go with the
// namespaces, cgroups and sysctls are put back.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/install"
)

// The lines the isolated child prints for its parent, one per line on
// stdout: what to forward, the kubeconfig and API key, and readiness.
const (
	msgForward = "forward"    // forward <name> <in-namespace addr>
	msgKubecfg = "kubeconfig" // kubeconfig <path>
	msgAPIKey  = "apikey"     // apikey <key>
	msgReady   = "ready"
)

type options struct {
	dir                       string
	apiPort, e2bPort, envPort int
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("localcluster: ")
	var o options
	fs := flag.NewFlagSet("localcluster", flag.ExitOnError)
	fs.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "sandbox-operator-localcluster"), "directory for the cluster's files and the kubeconfig; emptied at start and removed at exit (except the kubeconfig)")
	fs.IntVar(&o.apiPort, "kube-apiserver-port", 6443, "loopback port forwarded to the kube-apiserver (KUBECONFIG)")
	fs.IntVar(&o.e2bPort, "e2b-port", 3000, "loopback port forwarded to the sandbox-apiserver-e2b Service (E2B_API_URL)")
	fs.IntVar(&o.envPort, "data-plane-port", 3001, "loopback port forwarded to the sandbox-envd-proxy Service (E2B_SANDBOX_URL)")
	_ = fs.Parse(os.Args[1:])
	// bazel run names the artifacts as runfiles locations (the BUILD
	// file's env) without always saying where the runfiles tree is; it
	// sits beside the binary.
	if os.Getenv("RUNFILES_DIR") == "" {
		if exe, err := os.Executable(); err == nil {
			if st, err := os.Stat(exe + ".runfiles"); err == nil && st.IsDir() {
				_ = os.Setenv("RUNFILES_DIR", exe+".runfiles")
			}
		}
	}

	if cluster.InIsolatedChild() {
		if err := runInside(o); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := runOutside(o); err != nil {
		log.Fatal(err)
	}
}

// runOutside starts the isolated child, forwards the loopback ports into
// its namespace, prints the exports and waits for Ctrl-C.
func runOutside(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.RemoveAll(o.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	// Bind the ports first: a port in use fails now, not after minutes.
	listeners := map[string]net.Listener{}
	for name, port := range map[string]int{"kube-apiserver": o.apiPort, "e2b": o.e2bPort, "data-plane": o.envPort} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return fmt.Errorf("%s port: %w", name, err)
		}
		defer l.Close()
		listeners[name] = l
	}

	cmd, err := cluster.IsolatedCommand(os.Args[1:]...)
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Ctrl-C reaches the child too (same process group); a SIGTERM to this
	// process alone is passed on.
	go func() {
		<-ctx.Done()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}()

	pid := cmd.Process.Pid
	var kubeconfig, apiKey string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case msgForward:
			if len(f) == 3 && listeners[f[1]] != nil {
				go forward(listeners[f[1]], pid, f[2])
			}
		case msgKubecfg:
			if len(f) == 2 {
				if kubeconfig, err = hostKubeconfig(f[1], o); err != nil {
					_ = cmd.Process.Signal(syscall.SIGTERM)
					<-exited
					return err
				}
			}
		case msgAPIKey:
			if len(f) == 2 {
				apiKey = f[1]
			}
		case msgReady:
			fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)
			fmt.Printf("export E2B_API_URL=http://127.0.0.1:%d\n", o.e2bPort)
			fmt.Printf("export E2B_API_KEY=%s\n", apiKey)
			fmt.Printf("export E2B_DOMAIN=%s\n", install.Domain)
			fmt.Printf("export E2B_SANDBOX_URL=http://127.0.0.1:%d\n", o.envPort)
			fmt.Println("# ready (Ctrl-C stops the cluster and removes everything it made)")
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	err = <-exited
	if ctx.Err() != nil {
		// Stopped by Ctrl-C: the child's own exit status says whether the
		// teardown was clean.
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() != 0 {
			return fmt.Errorf("teardown: %w", err)
		}
		fmt.Fprintln(os.Stderr, "localcluster: stopped; nothing left behind")
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster exited: %w", err)
	}
	return errors.New("cluster exited")
}

// hostKubeconfig rewrites the in-namespace admin kubeconfig to point at
// the forwarded loopback port (the serving certificate names 127.0.0.1)
// and writes it into the directory.
func hostKubeconfig(path string, o options) (string, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = fmt.Sprintf("https://127.0.0.1:%d", o.apiPort)
	}
	out := filepath.Join(o.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	return out, nil
}

// forward relays every connection accepted on l to addr inside the
// network namespace of pid.
func forward(l net.Listener, pid int, addr string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			up, err := cluster.DialIn(ctx, pid, addr)
			cancel()
			if err != nil {
				log.Printf("forward to %s: %v", addr, err)
				return
			}
			defer up.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(up, c); closeWrite(up) }()
			go func() { defer wg.Done(); _, _ = io.Copy(c, up); closeWrite(c) }()
			wg.Wait()
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// runInside brings the system up inside the namespaces, fills the example
// warm pool, tells the parent what to forward and waits for SIGTERM.
func runInside(o options) error {
	if err := cluster.EnterIsolated(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, missing, err := install.FromEnv()
	if err != nil {
		return err
	}
	if missing != "" {
		return fmt.Errorf("%s is not set: run this with tools/bazel run //tools/localcluster, which builds what it installs", missing)
	}
	dir := filepath.Join(o.dir, "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	upCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	st, err := install.Up(upCtx, dir, a, log.Printf)
	if err != nil {
		return err
	}
	defer func() {
		log.Printf("stopping")
		if err := st.Down(); err != nil {
			log.Printf("teardown: %v", err)
		}
		_ = os.RemoveAll(dir)
	}()
	if err := install.ApplyWarmPools(upCtx, st, a, log.Printf); err != nil {
		log.Print(st.LogTail())
		return err
	}
	e2b, err := st.ServiceAddr(upCtx, "sandbox-apiserver-e2b")
	if err != nil {
		return err
	}
	proxy, err := st.ServiceAddr(upCtx, "sandbox-envd-proxy")
	if err != nil {
		return err
	}
	fmt.Printf("%s kube-apiserver %s\n", msgForward, strings.TrimPrefix(st.Node.Host(), "https://"))
	fmt.Printf("%s e2b %s\n", msgForward, e2b)
	fmt.Printf("%s data-plane %s\n", msgForward, proxy)
	fmt.Printf("%s %s\n", msgKubecfg, st.Node.Kubeconfig())
	fmt.Printf("%s %s\n", msgAPIKey, st.APIKey)
	fmt.Println(msgReady)
	<-ctx.Done()
	return nil
}
