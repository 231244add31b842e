package procstat

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestReadOfSelf(t *testing.T) {
	pid := os.Getpid()
	before, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if before.RSSBytes == 0 || before.PeakRSSBytes < before.RSSBytes {
		t.Errorf("rss %d, peak %d: want a non-zero RSS no larger than the peak", before.RSSBytes, before.PeakRSSBytes)
	}
	// Burn CPU until /proc shows 50 ms more (a loaded machine may give
	// the loop little of the wall time), and touch 64 MiB.
	deadline := time.Now().Add(20 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for range 1_000_000 {
			x++
		}
		if c, err := CPUSeconds(pid); err == nil && c-before.CPUSeconds >= 0.05 {
			break
		}
	}
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.CPUSeconds - before.CPUSeconds; d < 0.05 {
		t.Errorf("CPU time grew by %.3fs over a 20s busy loop", d)
	}
	if after.PeakRSSBytes < before.RSSBytes+32<<20 {
		t.Errorf("peak RSS %d after touching 64 MiB, was %d", after.PeakRSSBytes, before.RSSBytes)
	}
	_ = buf[x%len(buf)]
}

func TestResetPeakRSS(t *testing.T) {
	pid := os.Getpid()
	if err := ResetPeakRSS(pid); err != nil {
		t.Skipf("the kernel does not reset VmHWM here: %v", err)
	}
	rss, peak, err := Memory(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Just reset: the peak is the current RSS, give or take what the
	// runtime touched since.
	if peak > rss+16<<20 {
		t.Errorf("peak %d right after a reset, rss %d", peak, rss)
	}
}

func TestProcStatFieldsOddName(t *testing.T) {
	comm, f, err := procStatFields(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if comm == "" || len(f) < 20 {
		t.Errorf("comm %q, %d fields", comm, len(f))
	}
}

func TestFindChild(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if got := FindChild(os.Getpid(), "sleep"); got != cmd.Process.Pid {
		t.Errorf("FindChild = %d, want %d", got, cmd.Process.Pid)
	}
	if got := FindChild(os.Getpid(), "no-such-command"); got != 0 {
		t.Errorf("FindChild of nothing = %d", got)
	}
}

func TestReadMissingProcess(t *testing.T) {
	if _, err := Read(1 << 30); err == nil {
		t.Error("reading a pid that cannot exist succeeded")
	}
}

func TestClockTicks(t *testing.T) {
	if c := ClockTicks(); c < 1 || c > 10000 {
		t.Errorf("ClockTicks = %d", c)
	}
}
