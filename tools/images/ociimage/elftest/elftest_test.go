package elftest

import (
	"bytes"
	"debug/elf"
	"testing"
)

func TestStaticAndDynamicParse(t *testing.T) {
	for arch, m := range Machines {
		f, err := elf.NewFile(bytes.NewReader(Static(arch, "hello")))
		if err != nil {
			t.Fatalf("%s static: %v", arch, err)
		}
		if f.Machine != m || len(f.Progs) != 1 || f.Progs[0].Type != elf.PT_LOAD {
			t.Fatalf("%s static: machine %v progs %d", arch, f.Machine, len(f.Progs))
		}
		f, err = elf.NewFile(bytes.NewReader(Dynamic(arch, "hello", "/lib/ld.so")))
		if err != nil {
			t.Fatalf("%s dynamic: %v", arch, err)
		}
		if f.Progs[0].Type != elf.PT_INTERP {
			t.Fatalf("%s dynamic: first program header %v", arch, f.Progs[0].Type)
		}
		interp := make([]byte, f.Progs[0].Filesz)
		if _, err := f.Progs[0].ReadAt(interp, 0); err != nil || string(interp) != "/lib/ld.so\x00" {
			t.Fatalf("%s dynamic: interpreter %q (%v)", arch, interp, err)
		}
	}
}
