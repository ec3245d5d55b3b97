package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/config"
)

// ledgerFlag adds --ledger, bound to the config's ledger.dsn (env
// GANGWAY_LEDGER_DSN), to a command's flags.
func ledgerFlag(f *pflag.FlagSet, c *config.LedgerConfig) {
	f.StringVar(&c.DSN, "ledger", c.DSN, "usage ledger: "+accounting.DSNHelp+" (ledger.dsn; env GANGWAY_LEDGER_DSN)")
}

// openLedger opens the usage ledger. With mustExist (a command that only
// reads it), an SQLite file that is not there is an error rather than a
// new, empty ledger.
func openLedger(ctx context.Context, dsn string, mustExist bool) (*accounting.Ledger, error) {
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok && mustExist {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--ledger %s: no such file: give the ledger the server records to (--ledger, ledger.dsn or $GANGWAY_LEDGER_DSN)", dsn)
		}
	}
	l, err := accounting.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("--ledger: %w", err)
	}
	return l, nil
}
