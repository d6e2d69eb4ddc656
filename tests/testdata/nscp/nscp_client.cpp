// nscp_client: a test client that submits check results the way
// NSClient++'s NSCAClient module does, so that the tests can check which
// server decryption_method decrypts each NSClient++ encryption name.
//
// Written for nsca_fast's tests from the facts of NSClient++'s wire format
// (no code taken from it):
//   - read the server's 132-byte init packet: 128-byte IV, then the server's
//     time as a big-endian uint32;
//   - for every result build a packet of 16 + 64 + 128 + PAYLOAD_LEN bytes,
//     first filled with random bytes: int16 version 3 at 0, 2 random bytes,
//     uint32 CRC at 4, uint32 timestamp at 8 (the init packet's), int16
//     return code at 12, host at 14 (64 bytes), service at 78 (128 bytes),
//     output at 206 (PAYLOAD_LEN bytes), 2 random bytes at the end; each
//     text field is zeroed over its whole width and then gets at most its
//     width of text (so an output of exactly PAYLOAD_LEN bytes has no NUL);
//     the CRC (IEEE, reflected 0xEDB88320) covers the whole packet with the
//     CRC field zero, random padding included;
//   - encrypt with a Crypto++ block cipher in CFB mode with 1-byte feedback,
//     one byte per call; key = the password copied into a zeroed buffer of
//     NSClient++'s key size for that cipher (longer passwords are cut);
//     IV = the first block-size bytes of the server's IV; the cipher state
//     runs on from one packet to the next on a connection. "xor" XORs byte i
//     with IV[i % 128] and password[i % len], restarting at every packet;
//     "none" sends the packet as it is;
//   - send every packet over one connection (or reconnect every -n packets).
//
// Usage: nscp_client [-e] [-n PER_CONN] [-t TIMEOUT_S] HOST PORT CIPHER PASSWORD PAYLOAD_LEN < lines
// Each input line is host<TAB>service<TAB>code<TAB>output (an empty service
// makes a host check). With -e the output field decodes \n, \t, \r, \\ and
// \xHH, so tests can send multi-line output and any byte.
// CIPHER is one of NSClient++'s names (case-insensitive) or numbers:
// none, xor, des, 3des, cast128, xtea, 3way, blowfish, twofish, rc2,
// aes128/rijndael128, aes192/rijndael192, aes/aes256/rijndael256, serpent,
// gost. Unlike NSClient++, which falls back to no encryption, an unknown
// name is an error here, so that a typo in a test cannot pass as "none".
// Exit status: 0 all sent, 1 network error, 2 usage error.

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cryptopp/3way.h>
#include <cryptopp/aes.h>
#include <cryptopp/blowfish.h>
#include <cryptopp/cast.h>
#include <cryptopp/des.h>
#include <cryptopp/gost.h>
#include <cryptopp/modes.h>
#include <cryptopp/osrng.h>
#include <cryptopp/rc2.h>
#include <cryptopp/serpent.h>
#include <cryptopp/tea.h>
#include <cryptopp/twofish.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

const size_t kIVSize = 128;
const size_t kInitSize = kIVSize + 4;
const size_t kHeader = 16;  // version, padding, crc, timestamp, return code, 2 bytes of tail padding
const size_t kHostLen = 64;
const size_t kDescLen = 128;
const size_t kHostOff = 14;
const size_t kDescOff = kHostOff + kHostLen;
const size_t kOutOff = kDescOff + kDescLen;

// Coder encrypts a stream of packets for one connection.
class Coder {
 public:
  virtual ~Coder() {}
  virtual void Init(const std::string& password, const std::string& iv) = 0;
  virtual void Encrypt(unsigned char* p, size_t n) = 0;
};

class NoneCoder : public Coder {
 public:
  void Init(const std::string&, const std::string&) override {}
  void Encrypt(unsigned char*, size_t) override {}
};

class XorCoder : public Coder {
 public:
  void Init(const std::string& password, const std::string& iv) override {
    password_ = password;
    iv_ = iv;
  }
  void Encrypt(unsigned char* p, size_t n) override {
    for (size_t i = 0; i < n; i++) {
      p[i] ^= static_cast<unsigned char>(iv_[i % iv_.size()]);
      if (!password_.empty()) p[i] ^= static_cast<unsigned char>(password_[i % password_.size()]);
    }
  }

 private:
  std::string password_, iv_;
};

// BlockCoder is a Crypto++ block cipher T in CFB mode with 1-byte feedback.
template <class T>
class BlockCoder : public Coder {
 public:
  explicit BlockCoder(size_t keyLen) : keyLen_(keyLen) {}
  void Init(const std::string& password, const std::string& iv) override {
    std::vector<unsigned char> key(keyLen_, 0);
    memcpy(key.data(), password.data(), std::min(keyLen_, password.size()));
    cipher_.SetKey(key.data(), key.size());
    cfb_.SetCipherWithIV(cipher_, reinterpret_cast<const unsigned char*>(iv.data()), 1);
  }
  void Encrypt(unsigned char* p, size_t n) override {
    for (size_t i = 0; i < n; i++) cfb_.ProcessData(p + i, p + i, 1);
  }

 private:
  size_t keyLen_;
  typename T::Encryption cipher_;
  CryptoPP::CFB_Mode_ExternalCipher::Encryption cfb_;
};

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// NewCoder maps an NSClient++ encryption name or number to its cipher and
// key size; nullptr for a name NSClient++ does not know.
std::unique_ptr<Coder> NewCoder(const std::string& raw) {
  std::string n = Lower(raw);
  if (n == "none" || n == "0") return std::unique_ptr<Coder>(new NoneCoder());
  if (n == "xor" || n == "1") return std::unique_ptr<Coder>(new XorCoder());
  if (n == "des" || n == "2") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::DES>(8));
  if (n == "3des" || n == "3") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::DES_EDE3>(24));
  if (n == "cast128" || n == "4") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::CAST128>(16));
  if (n == "xtea" || n == "6") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::XTEA>(16));
  if (n == "3way" || n == "7") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::ThreeWay>(12));
  if (n == "blowfish" || n == "8") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::Blowfish>(56));
  if (n == "twofish" || n == "9") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::Twofish>(32));
  if (n == "rc2" || n == "11") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::RC2>(128));
  if (n == "aes128" || n == "rijndael128" || n == "14") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::AES>(16));
  if (n == "aes192" || n == "rijndael192" || n == "15") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::AES>(24));
  if (n == "aes" || n == "aes256" || n == "rijndael256" || n == "16") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::AES>(32));
  if (n == "serpent" || n == "20") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::Serpent>(32));
  if (n == "gost" || n == "23") return std::unique_ptr<Coder>(new BlockCoder<CryptoPP::GOST>(32));
  return nullptr;
}

uint32_t Crc32(const unsigned char* p, size_t n) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) crc = (crc >> 8) ^ table[(crc ^ p[i]) & 0xFF];
  return crc ^ 0xFFFFFFFFu;
}

void Put16(unsigned char* p, uint16_t v) {
  p[0] = static_cast<unsigned char>(v >> 8);
  p[1] = static_cast<unsigned char>(v);
}

void Put32(unsigned char* p, uint32_t v) {
  p[0] = static_cast<unsigned char>(v >> 24);
  p[1] = static_cast<unsigned char>(v >> 16);
  p[2] = static_cast<unsigned char>(v >> 8);
  p[3] = static_cast<unsigned char>(v);
}

void PutField(unsigned char* p, size_t width, const std::string& s) {
  memset(p, 0, width);
  memcpy(p, s.data(), std::min(width, s.size()));
}

struct Result {
  std::string host, service, output;
  int code;
};

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case 'x':
        if (i + 2 < s.size() && HexVal(s[i + 1]) >= 0 && HexVal(s[i + 2]) >= 0) {
          out += static_cast<char>(HexVal(s[i + 1]) * 16 + HexVal(s[i + 2]));
          i += 2;
          break;
        }
        out += "\\x";
        break;
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

bool ParseLine(const std::string& line, bool escapes, Result* r) {
  size_t a = line.find('\t');
  if (a == std::string::npos) return false;
  size_t b = line.find('\t', a + 1);
  if (b == std::string::npos) return false;
  size_t c = line.find('\t', b + 1);
  if (c == std::string::npos) return false;
  r->host = line.substr(0, a);
  r->service = line.substr(a + 1, b - a - 1);
  r->code = atoi(line.substr(b + 1, c - b - 1).c_str());
  r->output = line.substr(c + 1);
  if (escapes) r->output = Unescape(r->output);
  return true;
}

int Dial(const std::string& host, const std::string& port, int timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    timeval tv{};
    tv.tv_sec = timeout;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

bool ReadFull(int fd, unsigned char* p, size_t n) {
  while (n > 0) {
    ssize_t k = read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool WriteFull(int fd, const unsigned char* p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// SendBatch sends rs over one connection, as NSClient++ sends one submission.
bool SendBatch(const std::string& host, const std::string& port, int timeout, const std::string& cipher,
               const std::string& password, size_t payload, const std::vector<Result>& rs) {
  int fd = Dial(host, port, timeout);
  if (fd < 0) {
    fprintf(stderr, "nscp_client: cannot connect to %s:%s\n", host.c_str(), port.c_str());
    return false;
  }
  unsigned char init[kInitSize];
  if (!ReadFull(fd, init, sizeof init)) {
    fprintf(stderr, "nscp_client: no init packet from %s:%s\n", host.c_str(), port.c_str());
    close(fd);
    return false;
  }
  std::string iv(reinterpret_cast<char*>(init), kIVSize);
  uint32_t stamp = (uint32_t(init[128]) << 24) | (uint32_t(init[129]) << 16) | (uint32_t(init[130]) << 8) | init[131];
  std::unique_ptr<Coder> coder = NewCoder(cipher);
  coder->Init(password, iv);
  CryptoPP::AutoSeededRandomPool rng;
  const size_t size = kHeader + kHostLen + kDescLen + payload;
  std::vector<unsigned char> pkt(size);
  for (const Result& r : rs) {
    rng.GenerateBlock(pkt.data(), pkt.size());
    Put16(pkt.data(), 3);
    Put32(pkt.data() + 4, 0);
    Put32(pkt.data() + 8, stamp);
    Put16(pkt.data() + 12, static_cast<uint16_t>(static_cast<int16_t>(r.code)));
    PutField(pkt.data() + kHostOff, kHostLen, r.host);
    PutField(pkt.data() + kDescOff, kDescLen, r.service);
    PutField(pkt.data() + kOutOff, payload, r.output);
    Put32(pkt.data() + 4, Crc32(pkt.data(), pkt.size()));
    coder->Encrypt(pkt.data(), pkt.size());
    if (!WriteFull(fd, pkt.data(), pkt.size())) {
      fprintf(stderr, "nscp_client: write to %s:%s failed\n", host.c_str(), port.c_str());
      close(fd);
      return false;
    }
  }
  close(fd);
  return true;
}

int Usage() {
  fprintf(stderr,
          "usage: nscp_client [-e] [-n PER_CONN] [-t TIMEOUT_S] HOST PORT CIPHER PASSWORD PAYLOAD_LEN < lines\n"
          "  lines: host<TAB>service<TAB>code<TAB>output\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool escapes = false;
  size_t perConn = 0;  // 0: all on one connection
  int timeout = 10;
  int i = 1;
  for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
    std::string o = argv[i];
    if (o == "-e") {
      escapes = true;
    } else if (o == "-n" && i + 1 < argc) {
      perConn = static_cast<size_t>(atoi(argv[++i]));
    } else if (o == "-t" && i + 1 < argc) {
      timeout = atoi(argv[++i]);
    } else {
      return Usage();
    }
  }
  if (argc - i != 5) return Usage();
  std::string host = argv[i], port = argv[i + 1], cipher = argv[i + 2], password = argv[i + 3];
  long payload = atol(argv[i + 4]);
  if (payload < 1 || payload > (1L << 20)) {
    fprintf(stderr, "nscp_client: bad PAYLOAD_LEN %s\n", argv[i + 4]);
    return 2;
  }
  if (!NewCoder(cipher)) {
    fprintf(stderr, "nscp_client: unknown NSClient++ encryption %s\n", cipher.c_str());
    return 2;
  }
  std::vector<Result> rs;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Result r;
    if (!ParseLine(line, escapes, &r)) {
      fprintf(stderr, "nscp_client: bad input line (want host\\tservice\\tcode\\toutput): %s\n", line.c_str());
      return 2;
    }
    rs.push_back(r);
  }
  if (perConn == 0) perConn = rs.size();
  for (size_t k = 0; k < rs.size(); k += perConn) {
    std::vector<Result> batch(rs.begin() + k, rs.begin() + std::min(rs.size(), k + perConn));
    if (!SendBatch(host, port, timeout, cipher, password, static_cast<size_t>(payload), batch)) return 1;
  }
  return 0;
}
