// Package cosign signs and verifies OCI artifacts the way the cosign CLI does, with a key pair
// and offline: no Rekor transparency log, no Fulcio certificates, no TUF trust root.
//
// Sign writes two signatures of a manifest digest, so that every verifier in use today finds
// one it understands:
//
//   - the Sigstore bundle (media type application/vnd.dev.sigstore.bundle.v0.3+json): a DSSE
//     envelope over an in-toto statement whose subject is the digest and whose predicate type
//     is https://sigstore.dev/cosign/sign/v1, pushed as an OCI referrer of the artifact, exactly
//     as `cosign sign` v3 writes it (registries without the referrers API get the referrers tag
//     schema, sha256-HEX, instead);
//   - the legacy signature: a simple-signing payload naming the digest, signed, in a layer of
//     the `sha256-HEX.sig` tag with the dev.cosignproject.cosign/signature annotation, as cosign
//     v1 and v2 (and Flux with them) read it.
//
// Verify accepts either, with any of the given keys. The formats, payloads and cryptography are
// cosign's and sigstore-go's own code; this package only chooses the options and the order.
package cosign
