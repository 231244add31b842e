package buildstore

import (
	"context"
	"net/http"
)

// Admission decides an upload of one of templateID's archives that
// declares declared bytes (-1 when it declares none), before a byte of it
// is read. It returns the most bytes the upload may hold (the store's own
// bound applies as well) and done, which the store calls once the upload
// has ended, stored or not. An error refuses the upload: a *Refusal with
// its status and message, anything else as an internal error.
type Admission func(ctx context.Context, templateID, hash string, declared int64) (limit int64, done func(stored bool), err error)

// Refusal is an upload an Admission refused, answered with Status and
// Message in e2b's error shape.
type Refusal struct {
	Status  int
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// TooLarge refuses an upload past a bound; msg names the bound.
func TooLarge(msg string) *Refusal {
	return &Refusal{Status: http.StatusRequestEntityTooLarge, Message: msg}
}

// SetAdmission has admit decide every upload UploadHandler takes. Call it
// before the handler serves.
func (d *Dir) SetAdmission(admit Admission) { d.admit = admit }
