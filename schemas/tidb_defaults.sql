-- Column defaults as TiDB stores them (ColumnInfo.GetDefaultValue()), which TiCDC copies into the Avro
-- schema: the literal as written for DECIMAL (1.5 on DECIMAL(10,2) stays "1.5", 0 stays "0"; only in
-- avro-decimal-handling-mode=string do DECIMAL columns carry a default), integers normalised, FLOAT through
-- float32, BIT and binary strings as base64 bytes (BINARY(n) padded with zero bytes to n), temporal text
-- at the column's precision, YEAR as a number.
CREATE DATABASE IF NOT EXISTS `defaults`;

CREATE TABLE `defaults`.`literals` (
  `id` INT NOT NULL PRIMARY KEY,
  `price` DECIMAL(10,2) NOT NULL DEFAULT 1.5,
  `zero` DECIMAL(10,2) NOT NULL DEFAULT 0,
  `padded` DECIMAL(10,2) NOT NULL DEFAULT 1.50,
  `quoted` DECIMAL(10,2) NOT NULL DEFAULT '2.25',
  `fraction` DECIMAL(6,4) DEFAULT .5,
  `negative` DECIMAL(10,3) DEFAULT -0.5,
  `exponent` DECIMAL(12,2) DEFAULT 1e3,
  `flag` DECIMAL(1,0) NOT NULL DEFAULT TRUE,
  `whole` DECIMAL(20,0) UNSIGNED DEFAULT 18446744073709551616,
  `qty` INT NOT NULL DEFAULT 1.5,
  `ratio` FLOAT NOT NULL DEFAULT 3.14,
  `weight` DOUBLE DEFAULT -2.5,
  `code` BINARY(4) NOT NULL DEFAULT 'ab',
  `blob_tag` VARBINARY(8) DEFAULT x'00ff',
  `bits` BIT(10) NOT NULL DEFAULT b'1010101010',
  `at` DATETIME(3) NOT NULL DEFAULT '2024-02-29 12:34:56',
  `day` DATE DEFAULT '2024-02-29',
  `yr` YEAR DEFAULT 24,
  `label` VARCHAR(16) NOT NULL DEFAULT 'null',
  `kind` ENUM('a','b','c') NOT NULL DEFAULT 2
);
