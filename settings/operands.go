package settings

import "flag"

// LoadOperands is Load for a command that takes operands (the files it reads, say): it
// returns, in order, the arguments that are not flags, wherever they stand among the
// flags (Go's flag package stops at the first), and every argument after a "--" (a
// "--" given as a flag's value, --out --, ends the flags too).
func LoadOperands(fs *flag.FlagSet, cfg any, environ []string, args []string) ([]string, error) {
	if err := register(fs, cfg, environ); err != nil {
		return nil, err
	}
	var operands []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return operands, nil
		}
		// fs stopped at an operand, or after a "--" that ends the flags.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(operands, rest...), nil
		}
		operands, args = append(operands, rest[0]), rest[1:]
	}
}
