package sila2

// SiLAServiceFDL is the Feature Definition of the mandatory SiLAService
// feature (org.silastandard/core/SiLAService/v1), written from the SiLA 2
// standard's description of its calls. The client compiles it to talk to a
// server before it has read any other definition.
const SiLAServiceFDL = `<?xml version="1.0" encoding="utf-8" ?>
<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.silastandard" Category="core"
         xmlns="http://www.sila-standard.org">
  <Identifier>SiLAService</Identifier>
  <DisplayName>SiLA Service</DisplayName>
  <Description>Mandatory feature of every SiLA server: its identity and the definitions of its features.</Description>
  <Command>
    <Identifier>GetFeatureDefinition</Identifier>
    <DisplayName>Get Feature Definition</DisplayName>
    <Description>Returns the Feature Definition of an implemented feature.</Description>
    <Observable>No</Observable>
    <Parameter>
      <Identifier>FeatureIdentifier</Identifier>
      <DisplayName>Feature Identifier</DisplayName>
      <Description>Fully qualified identifier of the feature.</Description>
      <DataType><Basic>String</Basic></DataType>
    </Parameter>
    <Response>
      <Identifier>FeatureDefinition</Identifier>
      <DisplayName>Feature Definition</DisplayName>
      <Description>The feature definition XML.</Description>
      <DataType><Basic>String</Basic></DataType>
    </Response>
    <DefinedExecutionErrors><Identifier>UnimplementedFeature</Identifier></DefinedExecutionErrors>
  </Command>
  <Command>
    <Identifier>SetServerName</Identifier>
    <DisplayName>Set Server Name</DisplayName>
    <Description>Sets a human readable name of the server.</Description>
    <Observable>No</Observable>
    <Parameter>
      <Identifier>ServerName</Identifier>
      <DisplayName>Server Name</DisplayName>
      <Description>The new name.</Description>
      <DataType><Constrained><DataType><Basic>String</Basic></DataType><Constraints><MaximalLength>255</MaximalLength></Constraints></Constrained></DataType>
    </Parameter>
  </Command>
  <Property><Identifier>ServerName</Identifier><DisplayName>Server Name</DisplayName><Description>Human readable name.</Description><Observable>No</Observable><DataType><Basic>String</Basic></DataType></Property>
  <Property><Identifier>ServerType</Identifier><DisplayName>Server Type</DisplayName><Description>Type of the server.</Description><Observable>No</Observable><DataType><Basic>String</Basic></DataType></Property>
  <Property><Identifier>ServerUUID</Identifier><DisplayName>Server UUID</DisplayName><Description>Globally unique server id.</Description><Observable>No</Observable><DataType><Basic>String</Basic></DataType></Property>
  <Property><Identifier>ServerDescription</Identifier><DisplayName>Server Description</DisplayName><Description>What the server does.</Description><Observable>No</Observable><DataType><Basic>String</Basic></DataType></Property>
  <Property><Identifier>ServerVersion</Identifier><DisplayName>Server Version</DisplayName><Description>Version of the server.</Description><Observable>No</Observable><DataType><Basic>String</Basic></DataType></Property>
  <Property><Identifier>ServerVendorURL</Identifier><DisplayName>Server Vendor URL</DisplayName><Description>Vendor web site.</Description><Observable>No</Observable><DataType><Basic>String</Basic></DataType></Property>
  <Property><Identifier>ImplementedFeatures</Identifier><DisplayName>Implemented Features</DisplayName><Description>Fully qualified identifiers of the implemented features.</Description><Observable>No</Observable><DataType><List><DataType><Basic>String</Basic></DataType></List></DataType></Property>
  <DefinedExecutionError><Identifier>UnimplementedFeature</Identifier><DisplayName>Unimplemented Feature</DisplayName><Description>The feature is not implemented by this server.</Description></DefinedExecutionError>
</Feature>
`
