// Package buildstore keeps the archives a template build's COPY steps
// upload, keyed by template id and the files hash the e2b SDK computes.
//
// The SDK asks the surface whether an archive is stored
// (GET /templates/{templateID}/files/{hash}); when it is not, the surface
// hands out a URL (Store.UploadLink) and the SDK PUTs the archive there
// without an API key. The build later reads it back (Store.Open), and
// deleting the template drops its archives (Store.DeleteTemplate).
//
// Two stores implement Store:
//
//   - Dir keeps archives on a directory every replica of the surface
//     shares, at <dir>/e2b-files/<templateID>/<hash>, and takes the
//     uploads itself through UploadHandler.
//   - S3 keeps them in an S3 (or S3-compatible) bucket under
//     <prefix>/e2b-files/<templateID>/<hash>; the SDK uploads straight to
//     the bucket through a presigned PUT URL.
//
// # Dir upload URLs
//
// A Dir upload URL is
//
//	<base>/e2b-files/<templateID>/<hash>?expires=<unix seconds>&signature=<hex>
//
// where signature is the hex HMAC-SHA256, under the store's key, of
//
//	"PUT\n" + templateID + "\n" + hash + "\n" + expires
//
// The signature is the upload's only authorization: it binds the method,
// the template, the archive and the deadline, so a URL cannot be replayed
// for another template or archive, nor after it expires. Every replica is
// given the same key (derived from a secret they all share) and the same
// directory, so whichever replica the PUT reaches accepts a URL any other
// signed, and the archive it writes is seen by all.
//
// Ids are checked in every method (ErrInvalid) before they go near a
// path or an object key: a template id is 1-64 lowercase letters, digits,
// '-' or '_', and a hash 64 lowercase hex digits.
package buildstore
