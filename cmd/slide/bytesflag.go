package main

import (
	"flag"
	"strconv"
)

// bytesFlag is a byte-size flag: a bare number of bytes as before, or a size with a unit as
// --max-memory takes it (64MiB, 1.5GB; parseByteSize), so every flag that counts bytes reads
// sizes the same way. 0 is kept for the flags where it means something (checkNumbers judges
// it); its Get is the int64, so the numeric checks see it as a number.
type bytesFlag struct{ p *int64 }

var _ flag.Getter = bytesFlag{}

// bytesVar defines a byte-size flag on fs, stored in p.
func bytesVar(fs interface {
	Var(flag.Value, string, string)
}, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var(bytesFlag{p}, name, usage+" (bytes, or a size such as 64MiB or 1.5GB)")
}

func (b bytesFlag) String() string {
	if b.p == nil {
		return "0"
	}
	return strconv.FormatInt(*b.p, 10)
}

func (b bytesFlag) Get() any { return *b.p }

func (b bytesFlag) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*b.p = n // a bare number keeps its meaning, 0 and negatives included (checkNumbers)
		return nil
	}
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b.p = n
	return nil
}
