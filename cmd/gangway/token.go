package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/api"
)

func newTokenCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage the user API's tokens (on a server)"}
	var user, teams string
	var admin bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Make an API token for a user, print it once and add its hash to the token file",
		Long: `Make a random API token for --user, acting for --teams (comma-separated) or,
with --admin, for everything. The token is printed once, on stdout; only its
SHA-256 hash is appended to the token file (api.tokenFile, --api-tokens),
which the servers read again when it changes. Revoke a token by deleting its
line (the file names the user; the line starts with the hash whose first 12
digits are printed as the token's ID). Give the token to the user: the CLI
reads it from --token-file, GANGWAY_TOKEN_FILE or ~/.config/gangway/token.`,
		Example: "  gangway token create --user alice --teams ml,vision > alice.token",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.setup(cmd, false, false); err != nil {
				return err
			}
			if a.cfg.API.TokenFile == "" {
				return fmt.Errorf("api.tokenFile is empty: name the token file with --api-tokens")
			}
			var list []string
			if teams != "" {
				list = strings.Split(teams, ",")
			}
			tok, err := api.CreateToken(a.cfg.API.TokenFile, user, list, admin, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			fmt.Fprintf(cmd.ErrOrStderr(), "token %s for %s added to %s; it is shown only now\n", api.TokenID(tok), user, a.cfg.API.TokenFile)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&user, "user", "", "the user the token names (required)")
	f.StringVar(&teams, "teams", "", "the teams the user acts for, comma-separated")
	f.BoolVar(&admin, "admin", false, "make an admin token: every team's jobs, and the nodes")
	f.StringVar(&a.cfg.API.TokenFile, "api-tokens", a.cfg.API.TokenFile, "the token file (api.tokenFile)")
	_ = create.MarkFlagRequired("user")
	cmd.AddCommand(create)
	return cmd
}

func newWhoAmICmd(a *app) *cobra.Command {
	return readCmd(a, &cobra.Command{
		Use:   "whoami",
		Short: "Say who the user API takes you for: user, teams, admin",
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, cl *client.Client, _ []string) (client.Identity, error) {
		return cl.WhoAmI(cmd.Context())
	}, jsonOrText(func(w io.Writer, id client.Identity) error {
		role, teams := "user", strings.Join(id.Teams, ", ")
		if id.Admin {
			role, teams = "admin", "every team"
		}
		_, err := fmt.Fprintf(w, "%s (%s, by %s) at %s; acts for %s\n", id.User, role, id.Via, a.cli.API, teams)
		return err
	}))
}
