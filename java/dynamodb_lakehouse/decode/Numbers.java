package dynamodb_lakehouse.decode;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.regex.Pattern;

/**
 * A DynamoDB number's exact text (an {@code N} value): whether it fits {@code bigint} or a
 * {@code decimal(p,s)} exactly, and its one canonical text. The rules of
 * {@code ingestion/dynamodb/numbers.py}, computed on {@link BigDecimal} instead of by string
 * functions: a number is read only if it has the form DynamoDB writes (an optional minus, digits
 * with at most one point, an optional exponent), and is never rounded.
 */
final class Numbers {
  private static final Pattern NUMBER = Pattern.compile("^-?[0-9]*[.]?[0-9]*(?:[eE][+-]?[0-9]+)?$");
  private static final BigDecimal LONG_MIN = BigDecimal.valueOf(Long.MIN_VALUE);
  private static final BigDecimal LONG_MAX = BigDecimal.valueOf(Long.MAX_VALUE);

  private Numbers() {}

  /** The number, or null when the text is not one DynamoDB writes. */
  static BigDecimal parse(String text) {
    if (text == null || !NUMBER.matcher(text).matches() || !hasDigit(text)) return null;
    try {
      return new BigDecimal(text);
    } catch (NumberFormatException e) { // an exponent beyond an int
      return null;
    }
  }

  private static boolean hasDigit(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c >= '0' && c <= '9') return true;
    }
    return false;
  }

  /** Up to 18 digits, optionally signed: the common case, read without BigDecimal. */
  private static boolean plainLong(String text) {
    int n = text.length();
    int start = n > 0 && text.charAt(0) == '-' ? 1 : 0;
    if (n - start < 1 || n - start > 18) return false;
    for (int i = start; i < n; i++) {
      char c = text.charAt(i);
      if (c < '0' || c > '9') return false;
    }
    return true;
  }

  /** The value as a {@code bigint}: an integer within its range ({@code 1.5E+3} is one), else null. */
  static Long asLong(String text) {
    if (text == null) return null;
    if (plainLong(text)) return Long.parseLong(text);
    BigDecimal value = parse(text);
    if (value == null || fractionDigits(value) > 0) return null;
    if (value.compareTo(LONG_MIN) < 0 || value.compareTo(LONG_MAX) > 0) return null;
    return value.longValueExact();
  }

  private static int fractionDigits(BigDecimal value) {
    return value.signum() == 0 ? 0 : Math.max(value.stripTrailingZeros().scale(), 0);
  }

  /** The value in {@code decimal(precision, scale)}: exactly, no digit lost, else null. */
  static BigDecimal asDecimal(String text, int precision, int scale) {
    BigDecimal value = parse(text);
    if (value == null || fractionDigits(value) > scale) return null;
    // Integer digits checked before the scale is set: 1E+25569151 would need 25 million digits.
    if (value.signum() != 0 && value.precision() - value.scale() > precision - scale) return null;
    return value.setScale(scale);
  }

  /**
   * The one text of a number as DynamoDB compares numbers: no exponent, no leading or trailing
   * zero, no sign on zero; null when DynamoDB would not hold it (over 38 significant digits, or
   * a magnitude outside 1E-130 to under 1E+126).
   */
  static String canonical(String text) {
    BigDecimal value = parse(text);
    if (value == null) return null;
    if (value.signum() == 0) return "0";
    BigDecimal stripped = value.stripTrailingZeros();
    BigInteger unscaled = stripped.unscaledValue().abs();
    int digits = unscaled.toString().length();
    int point = digits - stripped.scale();
    if (digits > 38 || point < -129 || point > 126) return null;
    return stripped.toPlainString();
  }
}
