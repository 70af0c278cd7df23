// sifread: a SIF file as the SIF reference library (Debian's
// golang-github-sylabs-sif-dev) reads it: one line per data object, its
// type, size and (for a partition) file system, partition type and
// architecture, (for a definition file or labels) its bytes, quoted as Go
// quotes strings; then the SHA-256 of the primary system partition's bytes.
//
//	sifread FILE
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/sylabs/sif/pkg/sif"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sifread FILE")
		os.Exit(2)
	}
	f, err := sif.LoadContainerFromPath(os.Args[1], sif.OptLoadWithFlag(os.O_RDONLY))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sifread:", err)
		os.Exit(1)
	}
	defer f.UnloadContainer()
	ds, err := f.GetDescriptors()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sifread:", err)
		os.Exit(1)
	}
	for _, d := range ds {
		line := fmt.Sprintf("%v %d", d.DataType(), d.Size())
		if d.DataType() == sif.DataPartition {
			fs, pt, arch, err := d.PartitionMetadata()
			if err != nil {
				fmt.Fprintln(os.Stderr, "sifread:", err)
				os.Exit(1)
			}
			line += fmt.Sprintf(" %v %v %s", fs, pt, arch)
		} else if d.DataType() == sif.DataDeffile || d.DataType() == sif.DataLabels {
			b, err := d.GetData()
			if err != nil {
				fmt.Fprintln(os.Stderr, "sifread:", err)
				os.Exit(1)
			}
			line += fmt.Sprintf(" %q", b)
		}
		fmt.Println(line)
	}
	p, err := f.GetDescriptor(sif.WithPartitionType(sif.PartPrimSys))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sifread: no primary system partition:", err)
		os.Exit(1)
	}
	h := sha256.New()
	if _, err := io.Copy(h, p.GetReader()); err != nil {
		fmt.Fprintln(os.Stderr, "sifread:", err)
		os.Exit(1)
	}
	fmt.Printf("primary %x\n", h.Sum(nil))
}
