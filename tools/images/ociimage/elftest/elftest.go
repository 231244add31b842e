// Package elftest makes tiny ELF executables for tests of image builds: the
// header and program headers of a real Linux binary around an arbitrary
// payload, so a test can build an image for any platform without a cross
// compiler (and under Bazel, without a Go toolchain at test time).
package elftest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
)

const (
	ehdrSize = 64
	phdrSize = 56
	baseAddr = 0x400000
)

// Machines are the ELF machines of the architectures the images support.
var Machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// Static returns a statically linked ELF64 executable for arch ("amd64" or
// "arm64") whose loadable segment ends with payload.
func Static(arch, payload string) []byte { return build(arch, payload, "") }

// Dynamic returns one that names interp as its program interpreter, as a
// cgo build does.
func Dynamic(arch, payload, interp string) []byte { return build(arch, payload, interp) }

func build(arch, payload, interp string) []byte {
	m, ok := Machines[arch]
	if !ok {
		panic(fmt.Sprintf("elftest: unknown arch %q", arch))
	}
	nph := 1
	if interp != "" {
		nph = 2
	}
	headers := ehdrSize + nph*phdrSize
	interpOff := headers
	body := []byte(payload)
	if interp != "" {
		body = append([]byte(interp+"\x00"), body...)
	}
	size := uint64(headers + len(body))

	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE)})
	b.Write(make([]byte, 8))
	w := func(v any) { _ = binary.Write(&b, le, v) }
	w(uint16(elf.ET_EXEC))
	w(uint16(m))
	w(uint32(elf.EV_CURRENT))
	w(uint64(baseAddr + headers)) // entry
	w(uint64(ehdrSize))           // phoff
	w(uint64(0))                  // shoff
	w(uint32(0))                  // flags
	w(uint16(ehdrSize))
	w(uint16(phdrSize))
	w(uint16(nph))
	w(uint16(0)) // shentsize
	w(uint16(0)) // shnum
	w(uint16(0)) // shstrndx
	if interp != "" {
		w(uint32(elf.PT_INTERP))
		w(uint32(elf.PF_R))
		w(uint64(interpOff))
		w(uint64(baseAddr + interpOff))
		w(uint64(baseAddr + interpOff))
		w(uint64(len(interp) + 1))
		w(uint64(len(interp) + 1))
		w(uint64(1))
	}
	w(uint32(elf.PT_LOAD))
	w(uint32(elf.PF_R | elf.PF_X))
	w(uint64(0))
	w(uint64(baseAddr))
	w(uint64(baseAddr))
	w(size)
	w(size)
	w(uint64(0x1000))
	b.Write(body)
	return b.Bytes()
}
