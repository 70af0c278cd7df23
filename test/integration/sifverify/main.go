// sifverify: a SIF file's signatures as the SIF reference library
// (Debian's golang-github-sylabs-sif-dev, pkg/integrity) checks them,
// with the OpenPGP public keys in KEYFILE (armoured or binary). Exits 0
// when every object group's signatures verify, 1 with the library's
// error otherwise. -legacy checks signatures in the legacy format instead.
//
//	sifverify [-legacy] FILE KEYFILE
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/sylabs/sif/pkg/integrity"
	"github.com/sylabs/sif/pkg/sif"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sifverify:", err)
	os.Exit(1)
}

func main() {
	legacy := flag.Bool("legacy", false, "check legacy signatures")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: sifverify [-legacy] FILE KEYFILE")
		os.Exit(2)
	}
	raw, err := os.ReadFile(flag.Arg(1))
	if err != nil {
		fail(err)
	}
	kr, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(raw))
	if err != nil {
		if kr, err = openpgp.ReadKeyRing(bytes.NewReader(raw)); err != nil {
			fail(err)
		}
	}
	f, err := sif.LoadContainerFromPath(flag.Arg(0), sif.OptLoadWithFlag(os.O_RDONLY))
	if err != nil {
		fail(err)
	}
	defer f.UnloadContainer()
	opts := []integrity.VerifierOpt{integrity.OptVerifyWithKeyRing(kr)}
	if *legacy {
		opts = append(opts, integrity.OptVerifyLegacy())
	}
	v, err := integrity.NewVerifier(f, opts...)
	if err != nil {
		fail(err)
	}
	if err := v.Verify(); err != nil {
		fail(err)
	}
	fmt.Println("verified")
}
