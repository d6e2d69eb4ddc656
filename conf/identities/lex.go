package identities

import (
	"fmt"
	"strings"
)

// tokKind is what a token is.
type tokKind int

const (
	tokEOF    tokKind = iota
	tokWord           // an unquoted word: a key, a title or a value
	tokString         // a quoted string, unescaped
	tokPunct          // one of = { } ( ) , ; or +=
)

// token is one lexical element with the line it starts on.
type token struct {
	kind tokKind
	text string
	line int
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "the end of the file"
	case tokString:
		return fmt.Sprintf("%q", t.text)
	}
	return "`" + t.text + "'"
}

// lexer splits a file in libConfuse's syntax, as nsca-ng reads it:
// comments from # or // to the end of the line and between /* and */,
// "double-quoted" strings with backslash escapes, 'single-quoted' strings
// whose only escapes are \' and \\, and unquoted words.
type lexer struct {
	src  string
	pos  int
	line int
	err  error
}

func newLexer(src string) *lexer { return &lexer{src: src, line: 1} }

// wordByte says whether b may be part of an unquoted word.
func wordByte(b byte) bool {
	return !strings.ContainsRune(" \t\r\n{}()=,;+\"'#", rune(b))
}

// next returns the next token, or tokEOF with l.err set on a lexical error.
func (l *lexer) next() token {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case c == '#' || strings.HasPrefix(l.src[l.pos:], "//"):
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case strings.HasPrefix(l.src[l.pos:], "/*"):
			end := strings.Index(l.src[l.pos+2:], "*/")
			if end < 0 {
				l.err = fmt.Errorf("line %d: a /* comment is never closed", l.line)
				return token{kind: tokEOF, line: l.line}
			}
			l.line += strings.Count(l.src[l.pos:l.pos+2+end], "\n")
			l.pos += end + 4
		default:
			return l.token()
		}
	}
	return token{kind: tokEOF, line: l.line}
}

func (l *lexer) token() token {
	start, c := l.line, l.src[l.pos]
	switch {
	case strings.HasPrefix(l.src[l.pos:], "+="):
		l.pos += 2
		return token{kind: tokPunct, text: "+=", line: start}
	case strings.ContainsRune("={}(),;", rune(c)):
		l.pos++
		return token{kind: tokPunct, text: string(c), line: start}
	case c == '"' || c == '\'':
		return l.quoted(c)
	case c == '+':
		l.err = fmt.Errorf("line %d: a lone +; write += to add to a list", l.line)
		return token{kind: tokEOF, line: start}
	}
	end := l.pos
	for end < len(l.src) && wordByte(l.src[end]) {
		end++
	}
	w := l.src[l.pos:end]
	l.pos = end
	return token{kind: tokWord, text: w, line: start}
}

// quoted reads a string in quote q. In double quotes \n, \t, \r, \f, \b,
// \", \\ and \<newline> (nothing) are escapes; in single quotes only \'
// and \\ are. Any other backslash stays, with what follows it, so that a
// pattern's "\." means a literal dot whether or not the author doubled
// the backslash.
func (l *lexer) quoted(q byte) token {
	start := l.line
	var b strings.Builder
	for i := l.pos + 1; i < len(l.src); i++ {
		c := l.src[i]
		switch {
		case c == q:
			l.pos = i + 1
			return token{kind: tokString, text: b.String(), line: start}
		case c == '\n':
			l.line++
			b.WriteByte(c)
		case c == '\\' && i+1 < len(l.src):
			i++
			e := l.src[i]
			if q == '\'' {
				if e != '\'' && e != '\\' {
					b.WriteByte('\\')
				}
				if e == '\n' {
					l.line++
				}
				b.WriteByte(e)
				continue
			}
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'f':
				b.WriteByte('\f')
			case 'b':
				b.WriteByte('\b')
			case '"', '\\':
				b.WriteByte(e)
			case '\n':
				l.line++
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	l.err = fmt.Errorf("line %d: a string is never closed", start)
	return token{kind: tokEOF, line: start}
}
