package ociimage

import (
	"debug/elf"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// elfMachines maps the platforms the images are built for to the ELF
// machine their binaries must be compiled for.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// checkStaticBinary rejects a binary that would not run on the empty base
// image: not an ELF executable, built for another architecture than the
// platform it is placed under, or dynamically linked (the image has no
// loader and no libc, so a cgo build fails only at container start).
func checkStaticBinary(r io.ReaderAt, p v1.Platform) error {
	want, ok := elfMachines[p.Architecture]
	if !ok || p.OS != "linux" {
		return fmt.Errorf("unsupported platform %s (supported: linux/amd64, linux/arm64)", p.String())
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ELF type %v is not an executable", f.Type)
	}
	if f.Machine != want {
		return fmt.Errorf("built for %v, not for %s", f.Machine, p.String())
	}
	for _, prog := range f.Progs {
		switch prog.Type {
		case elf.PT_INTERP:
			return fmt.Errorf("dynamically linked (it names a program interpreter); build with CGO_ENABLED=0")
		case elf.PT_DYNAMIC:
			// A static-pie binary has PT_DYNAMIC but no DT_NEEDED; anything
			// it needs from a shared library would be missing at run time.
			libs, err := f.ImportedLibraries()
			if err != nil {
				return fmt.Errorf("reading the dynamic section: %w", err)
			}
			if len(libs) > 0 {
				return fmt.Errorf("links shared libraries %v; build with CGO_ENABLED=0", libs)
			}
		}
	}
	return nil
}
