package isolate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// programEnvelope is what the init sends the program once the root is in
// place: the program's config and the user Command runs as.
type programEnvelope struct {
	Config []byte
	User   *sandboxUser
}

// currentUser is the sandbox's default user, set in the program process;
// nil anywhere else.
var currentUser *sandboxUser

// runProgram is the init's child: it waits for the init to finish pivot_root, then runs
// the registered program. It never returns.
func runProgram() {
	// Before anything else: root inside runs with the program's own
	// capabilities and uid, so only this keeps it from ptracing the
	// program or reaching its descriptors through /proc/2/fd.
	if err := setNotDumpable(); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: %v\n", err)
		os.Exit(1)
	}
	name := os.Getenv(envProgram)
	// Nothing the program starts should believe it is a stage of ours.
	os.Unsetenv(envStage)
	os.Unsetenv(envProgram)
	os.Unsetenv("GODEBUG")
	os.Unsetenv("GOMAXPROCS")
	// Running Go code means the dynamic loader is done with the host's
	// libraries: tell the init it may pivot_root now.
	ready := os.NewFile(fdReady, "ready")
	_, _ = ready.Write([]byte{1})
	ready.Close()
	var env programEnvelope
	// EOF here means the init failed before pivot_root and is exiting.
	if err := json.NewDecoder(os.NewFile(fdConfig, "config")).Decode(&env); err != nil {
		os.Exit(1)
	}
	if err := checkNoCgroupFDs(); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: %v\n", err)
		os.Exit(1)
	}
	if err := os.Chdir("/"); err != nil {
		fmt.Fprintf(os.Stderr, "isolate: chdir /: %v\n", err)
		os.Exit(1)
	}
	currentUser = env.User
	fn, ok := lookupProgram(name)
	if !ok {
		fmt.Fprintf(os.Stderr, "isolate: program %q not registered in this binary\n", name)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
	err := fn(ctx, env.Config)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "isolate: program %q: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// syscallForkExec starts argv0 with exactly env and files (fd i = files[i]).
// No Pdeathsig: the forking thread exits right after, and the program's
// lifetime is the init's anyway (the PID namespace dies with its init).
func syscallForkExec(argv0 string, argv, env []string, files []uintptr) (int, error) {
	return syscall.ForkExec(argv0, argv, &syscall.ProcAttr{
		Dir:   "/",
		Env:   env,
		Files: files,
	})
}
