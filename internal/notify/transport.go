package notify

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"
)

// DenyInternalFlag is the controller flag that sets DenyInternal; messages
// name it so that whoever reads a refusal knows where it comes from.
const DenyInternalFlag = "--notification-deny-internal-addresses"

// NewHTTPClient is the client notifications are sent with. It follows no
// redirect: Go's client would turn the POST into a GET to wherever a 30x
// points, so an endpoint (or whoever controls one) could steer the
// controller to any address it can reach, this one's loopback included.
// A 30x is a failed delivery instead (deliveryOutcome). With denyInternal,
// every connection to a loopback, link-local (169.254.0.0/16, where cloud
// metadata services answer; fe80::/10) or unspecified address is refused
// when dialled, that is after DNS: a host name resolving there is refused
// too, whatever it resolved to when the Alert was written.
func NewHTTPClient(denyInternal bool) *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if denyInternal {
		dialer.Control = refuseInternal
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = dialer.DialContext
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// errInternalAddress is a dial refused by refuseInternal.
var errInternalAddress = errors.New("the address is a loopback or link-local address, which " + DenyInternalFlag + " refuses")

// refuseInternal is a net.Dialer Control: address is the resolved ip:port
// about to be dialled.
func refuseInternal(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return errInternalAddress
	}
	ip := net.ParseIP(host)
	if ip == nil || isInternal(ip) {
		return errInternalAddress
	}
	return nil
}

// isInternal: loopback, link-local (unicast and multicast), interface-local
// multicast, or unspecified (0.0.0.0 and :: reach this host).
func isInternal(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsUnspecified()
}

// transportClass names what went wrong on the way to the endpoint, without
// the text of the error: that holds addresses and ports and tells a closed
// port from a filtered one, which would make the Alert's status a port
// scanner for whoever may write Alerts. The detail goes to the controller's
// log only.
func transportClass(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var opErr *net.OpError
	switch {
	case errors.Is(err, errInternalAddress):
		return errInternalAddress.Error()
	case errors.As(err, &dnsErr):
		return "could not resolve the host name: check spec.provider.address"
	case errors.As(err, &certErr), errors.As(err, &recordErr):
		return "the TLS handshake failed: check the address's scheme and certificate"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "could not connect: check spec.provider.address"
	}
	return "the request failed on the way to the endpoint: check spec.provider.address"
}
