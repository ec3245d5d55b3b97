package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gangwayhq/gangway/internal/accounting"
)

// Until the config file has a ledger section, the usage ledger's DSN comes
// from --ledger on the commands that use it, or from $GANGWAY_LEDGER_DSN.
const (
	ledgerDSNEnv = "GANGWAY_LEDGER_DSN"
	// defaultLedgerDSN is in the server unit's StateDirectory (deploy/systemd).
	defaultLedgerDSN = "sqlite:/var/lib/gangway-server/ledger.db"
)

// ledgerFlag adds --ledger to a command's flags, defaulting to
// $GANGWAY_LEDGER_DSN, else defaultLedgerDSN.
func ledgerFlag(f *pflag.FlagSet, dsn *string) {
	def := os.Getenv(ledgerDSNEnv)
	if def == "" {
		def = defaultLedgerDSN
	}
	f.StringVar(dsn, "ledger", def, "usage ledger: "+accounting.DSNHelp+" (env "+ledgerDSNEnv+")")
}

// openLedger opens the usage ledger. With mustExist (a command that only
// reads it), an SQLite file that is not there is an error rather than a
// new, empty ledger.
func openLedger(ctx context.Context, dsn string, mustExist bool) (*accounting.Ledger, error) {
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok && mustExist {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--ledger %s: no such file: give the ledger the server records to (--ledger or $%s)", dsn, ledgerDSNEnv)
		}
	}
	l, err := accounting.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("--ledger: %w", err)
	}
	return l, nil
}
