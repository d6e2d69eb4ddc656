// Package nrdp is the front end for NRDP (Nagios Remote Data Processor)
// clients: NCPA's passive checks, NSClient++'s NRDPClient and NRDP's own
// send_nrdp scripts. It serves NRDP 2.x's one HTTP entry point on a
// listener of its own (nrdp_listen, HTTPS with nrdp_tls_cert), at the
// paths those clients use, and hands every result and command to
// validation as an intake.Submission, so that NRDP's results take the
// road send_nsca's and nsca-ng's take: validation's rules (names, age,
// spoofing, the identity's rights), then the emit stage and its sinks.
//
// A request is read as NRDP reads it: GET and POST fields merged, POST
// winning and a field's later value winning, url-encoded or multipart;
// cmd is hello, submitcheck (XML or JSON in any of NRDP's aliases),
// submitcmd or submitrawcmd; the answer is NRDP's XML or JSON (indented
// with pretty, as NRDP's PHP indents it), byte for byte where its clients
// read it. output_type chooses the answer's form only: the data's field
// says how to read the data (NRDP reads it as output_type says, so that
// JSONDATA with output_type=xml processes nothing there).
//
// Tokens are identities. A token key in identities_file names the
// identity whose hosts, services, commands and networks the request's
// submissions are held to; nrdp_tokens are tokens with any-host rights
// and no commands (a Source without Identity). A token is never a
// password: passwords are the send_nsca key and the nsca-ng PSK, and a
// token travels in every request, in clear over plain HTTP.
//
// # HTTP status
//
// NRDP answers 200 to everything and says in the body what happened. Its
// clients read the body only on a 2xx: send_nrdp.sh runs curl -f, which
// turns anything else into "could not connect to NRDP server" and keeps
// the results to send again (with -D); NSClient++ reports only the status
// line; NCPA logs the body whatever the status. So every answer a client
// must read stays 200: success, a refused token (NO TOKEN, BAD TOKEN),
// bad data (BAD XML, BAD JSON) and results refused one by one, whose
// retry could never succeed. The HTTP status says what a proxy or curl -f
// should see where the clients lose nothing by it: 503 with Retry-After
// when the pipeline did not take or refuse the results within nrdp_timeout
// or the server is shutting down (the request may be sent again, and
// send_nrdp.sh keeps it for that), 413 for a body over
// nrdp_max_request_size, 400 for an unreadable body or an unknown cmd,
// 404 for another path and 405 for another method.
//
// # Answers
//
// When every result was taken, the answer is NRDP's: status 0, message OK
// and "N checks processed". When some were refused (by validation's rules,
// which also count, log and report the results this package could not
// make whole and hands in as Malformed: a state that is not 0..3, a time
// that is no number, a service result without servicename), the output
// says how many, and a refused
// element in meta lists each by its index in the request (from 0), its
// names, the counters' reason and the error, in attributes: send_nrdp.sh
// greps the last <status> and <message>, NCPA reads the first message and
// output elements, NSClient++ result/status and result/message, and none
// of them is in the list. The status stays 0 while anything was taken,
// since sending the request again would duplicate what was; it is -1
// with message "REFUSED: reason" when every result was refused.
//
// # Bounds
//
// net/http serves each connection on a goroutine of its own; the
// listener accepts at most nrdp_max_connections at once (more wait in the
// kernel's listen queue), which bounds those goroutines and the memory of
// requests (a body of nrdp_max_request_size, its decoded fields and its
// parsed results). Header, body, write and idle timeouts end slow
// clients; a request's results are sent one after another on the
// handler's goroutine, none per result, and the handler waits for their
// outcomes at most nrdp_timeout. A full pipeline makes NRDP's handlers
// wait as it makes the other front ends' readers wait, and no NRDP client
// holds anything the other front ends need.
package nrdp
