package isolate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A sandbox's writable layer is bounded the way a VM's disk is: it lives on
// a filesystem of its own, an ext4 image of Spec.DiskMiB made sparse in the
// sandbox's directory and mounted through a loop device. A write past the
// bound gets ENOSPC inside; the host's disk holds at most the bound per
// sandbox, and a sandbox's writes never fill the filesystem its
// neighbours' layers share.
//
// The filesystem is mounted nowhere on the host: it is a detached mount
// whose descriptor the runtime holds (the host reaches the layer at
// /proc/self/fd/<n>, which is what LayerDir, SaveLayer and a fork's copy
// read), and the sandbox gets an idmapped clone of it in its own mount
// namespace. Nothing of it outlives the runtime process however that ends:
// its descriptor closes, the sandbox's namespace goes with its last
// process, and the loop device, made with autoclear, is released with the
// filesystem's last reference.

// diskName is the image in the sandbox directory.
const diskName = "disk.img"

// mkfsSearchPath is where mkfs.ext4 is looked for besides PATH: test and
// service environments often run with a PATH without the sbin directories.
var mkfsSearchPath = []string{"/usr/sbin", "/sbin"}

// findMkfs locates mkfs.ext4 (e2fsprogs).
func findMkfs() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, dir := range mkfsSearchPath {
		p := filepath.Join(dir, "mkfs.ext4")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("isolate: mkfs.ext4 (e2fsprogs) not found; it is needed to bound a sandbox's disk (Spec.DiskMiB)")
}

// openLayerDisk makes the sandbox's disk image of sizeMiB in dir and
// returns its filesystem as a detached mount, whose root holds the layer's
// upper and work directories, and the loop device's number, which the
// sandbox's I/O limits name.
func openLayerDisk(dir string, sizeMiB int) (*os.File, uint64, error) {
	mkfs, err := findMkfs()
	if err != nil {
		return nil, 0, err
	}
	image := filepath.Join(dir, diskName)
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("isolate: disk image: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(int64(sizeMiB) << 20); err != nil {
		return nil, 0, fmt.Errorf("isolate: size the disk image: %w", err)
	}
	// No journal (the layer does not outlive a host crash anyway), no
	// blocks reserved for root (root inside would otherwise get more room
	// than the bound says), and no zeroing of tables up front.
	out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal",
		"-E", "lazy_itable_init=1,nodiscard", image).CombinedOutput()
	if err != nil {
		return nil, 0, fmt.Errorf("isolate: make the disk's filesystem: %v: %s", err, out)
	}
	loop, err := attachLoop(f)
	if err != nil {
		return nil, 0, err
	}
	defer loop.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(loop.Fd()), &st); err != nil {
		return nil, 0, fmt.Errorf("isolate: stat %s: %w", loop.Name(), err)
	}
	fs, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, 0, fmt.Errorf("isolate: open an ext4 context: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "source", loop.Name()); err != nil {
		return nil, 0, fmt.Errorf("isolate: disk source %s: %w", loop.Name(), err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, 0, fmt.Errorf("isolate: mount the disk (%s): %w", loop.Name(), err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOATIME)
	if err != nil {
		return nil, 0, fmt.Errorf("isolate: mount the disk (%s): %w", loop.Name(), err)
	}
	return os.NewFile(uintptr(mnt), "disk"), st.Rdev, nil
}

// loopAttempts bounds the retries when another process takes the free loop
// device between asking for it and configuring it.
const loopAttempts = 32

// attachLoop binds a free loop device to image, with autoclear: the device
// detaches itself once nothing (the mount, the returned file) holds it.
func attachLoop(image *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("isolate: loop devices: %w", err)
	}
	defer ctl.Close()
	var last error
	for range loopAttempts {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("isolate: find a free loop device: %w", err)
		}
		name := "/dev/loop" + strconv.Itoa(n)
		dev, err := os.OpenFile(name, os.O_RDWR|unix.O_CLOEXEC, 0)
		if errors.Is(err, os.ErrNotExist) {
			// A /dev without devtmpfs: make the node the kernel just
			// allocated.
			if err = unix.Mknod(name, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err == nil || errors.Is(err, os.ErrExist) {
				dev, err = os.OpenFile(name, os.O_RDWR|unix.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("isolate: open %s: %w", name, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(image.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("isolate: attach %s: %w", name, err)
		}
		last = err
	}
	return nil, fmt.Errorf("isolate: no loop device stayed free in %d attempts: %w", loopAttempts, last)
}
