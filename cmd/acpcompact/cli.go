package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// newFlagSet is a subcommand's flag set: it reports to stderr, and -h
// prints usage, then the flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// transcriptArg parses the arguments of a command that reads one
// transcript FILE (audit, check), its flags before or after it. When ok is
// false the command ends with exit: 0 after -h, 2 on a usage error (said on
// stderr).
func transcriptArg(fs *flag.FlagSet, args []string, stderr io.Writer) (file string, exit int, ok bool) {
	files, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return "", 0, false
	}
	if err != nil {
		return "", 2, false
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "acpcompact %s: want exactly one FILE (or - for stdin)\n", fs.Name())
		fs.Usage()
		return "", 2, false
	}
	return files[0], 0, true
}

// parseInterspersed lets flags follow the file name too ("check x.jsonl
// --schema=off"), which the flag package alone stops parsing at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// openTranscript opens a transcript FILE, "-" being stdin, and names it
// for messages ("<stdin>" for stdin). The caller closes in.
func openTranscript(file string, stdin io.Reader) (name string, in io.ReadCloser, err error) {
	if file == "-" {
		return "<stdin>", io.NopCloser(stdin), nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", nil, err
	}
	return file, f, nil
}
