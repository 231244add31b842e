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
// sandbox's directory and mounted there through a loop device. A write
// past the bound gets ENOSPC inside; the host's disk holds at most the
// bound per sandbox, and a sandbox's writes never fill the filesystem its
// neighbours' layers share.
//
// The image is mounted in the host's mount namespace (private, under the
// runtime's 0700 state directory) so that SaveLayer, LayerDir and a fork's
// copy read the layer at a host path as before. Close detaches the mount;
// the loop device is made with autoclear, so the kernel releases it with
// the filesystem's last reference.

// diskName and diskMount are the image and its mount point in the sandbox
// directory.
const (
	diskName  = "disk.img"
	diskMount = "disk"
)

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

// mountLayerDisk makes the sandbox's disk image of sizeMiB in dir, mounts
// it at dir/disk and returns the mount point.
func mountLayerDisk(dir string, sizeMiB int) (string, error) {
	mkfs, err := findMkfs()
	if err != nil {
		return "", err
	}
	image := filepath.Join(dir, diskName)
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", fmt.Errorf("isolate: disk image: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(int64(sizeMiB) << 20); err != nil {
		return "", fmt.Errorf("isolate: size the disk image: %w", err)
	}
	// No journal (the layer does not outlive a host crash anyway), no
	// blocks reserved for root (root inside would otherwise get more room
	// than the bound says), and no zeroing of tables up front.
	out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal",
		"-E", "lazy_itable_init=1,nodiscard", image).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("isolate: make the disk's filesystem: %v: %s", err, out)
	}
	loop, err := attachLoop(f)
	if err != nil {
		return "", err
	}
	defer loop.Close()
	mnt := filepath.Join(dir, diskMount)
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return "", err
	}
	if err := unix.Mount(loop.Name(), mnt, "ext4", unix.MS_NODEV|unix.MS_NOATIME, ""); err != nil {
		return "", fmt.Errorf("isolate: mount the disk (%s): %w", loop.Name(), err)
	}
	// Never propagated to (or from) other mount namespaces: the layer is
	// the runtime's business alone.
	if err := unix.Mount("", mnt, "", unix.MS_PRIVATE, ""); err != nil {
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
		return "", fmt.Errorf("isolate: make the disk mount private: %w", err)
	}
	return mnt, nil
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
