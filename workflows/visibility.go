package workflows

import (
	"errors"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/gangwayhq/gangway"
)

// Search attributes of job workflows, for Temporal's UI and `temporal
// workflow list --query`: the job's team, priority class, phase and pool
// (of its current placement). Their names need registering on the
// namespace once: `gangway dev` starts its Temporal with them; a cluster
// needs `temporal operator search-attribute create --name GangwayTeam
// --type Keyword` and so on (SearchAttributes lists them).
var (
	SearchTeam          = temporal.NewSearchAttributeKeyKeyword("GangwayTeam")
	SearchPriorityClass = temporal.NewSearchAttributeKeyKeyword("GangwayPriorityClass")
	SearchPhase         = temporal.NewSearchAttributeKeyKeyword("GangwayPhase")
	SearchPool          = temporal.NewSearchAttributeKeyKeyword("GangwayPool")
)

// SearchAttributes are the job workflows' search attributes.
var SearchAttributes = []temporal.SearchAttributeKey{SearchTeam, SearchPriorityClass, SearchPhase, SearchPool}

// SearchAttributeFlags are SearchAttributes as NAME=TYPE, as `temporal
// server start-dev --search-attribute` takes them.
func SearchAttributeFlags() []string {
	out := make([]string, len(SearchAttributes))
	for i, k := range SearchAttributes {
		out[i] = k.GetName() + "=" + searchType(k.GetValueType())
	}
	return out
}

func searchType(t enums.IndexedValueType) string {
	switch t {
	case enums.INDEXED_VALUE_TYPE_KEYWORD:
		return "Keyword"
	case enums.INDEXED_VALUE_TYPE_TEXT:
		return "Text"
	case enums.INDEXED_VALUE_TYPE_INT:
		return "Int"
	case enums.INDEXED_VALUE_TYPE_DOUBLE:
		return "Double"
	case enums.INDEXED_VALUE_TYPE_BOOL:
		return "Bool"
	case enums.INDEXED_VALUE_TYPE_DATETIME:
		return "Datetime"
	case enums.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		return "KeywordList"
	}
	return t.String()
}

// StartSearchAttributes are what a job's workflow starts with. A workflow
// started with them keeps its phase and pool up to date; one started
// without (a namespace where they are not registered) sets none.
func StartSearchAttributes(spec gangway.JobSpec) temporal.SearchAttributes {
	class := spec.PriorityClass
	if class == "" {
		class = gangway.PriorityNormal
	}
	return temporal.NewSearchAttributes(SearchTeam.ValueSet(spec.Team), SearchPriorityClass.ValueSet(class),
		SearchPhase.ValueSet(string(gangway.PhaseSubmitted)))
}

// ErrTypeJobFailed is the type of the error a job's workflow fails with
// when the job ended Failed; its details hold the job's Status.
const ErrTypeJobFailed = "JobFailed"

// closeError is how a job's workflow closes for its final status: Failed
// fails the workflow (an ApplicationError of ErrTypeJobFailed), Cancelled
// cancels it (a CanceledError), both with the Status as details, so
// Temporal shows the job as it ended and the result stays readable
// (StatusFromError); Succeeded completes it with the Status.
func closeError(st Status) error {
	switch st.Phase {
	case gangway.PhaseFailed:
		return temporal.NewNonRetryableApplicationError(st.Reason, ErrTypeJobFailed, nil, st)
	case gangway.PhaseCancelled:
		return temporal.NewCanceledError(st)
	}
	return nil
}

// StatusFromError reads the Status a job's workflow closed with from the
// error it failed or was cancelled with; false if err carries none (an
// invalid spec, a timeout, a workflow from before statuses were carried).
func StatusFromError(err error) (Status, bool) {
	var st Status
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == ErrTypeJobFailed && app.HasDetails() {
		return st, app.Details(&st) == nil
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) && canceled.HasDetails() {
		return st, canceled.Details(&st) == nil
	}
	return st, false
}
